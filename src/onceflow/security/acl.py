"""Kafka's ACL model: resource types, pattern types, operations, permission types, and the value
types built from them (`ResourcePattern`, `AccessControlEntry`, `AclBinding`) with their filters.

The enum values are Kafka's wire codes (CreateAcls, DescribeAcls, DeleteAcls and the
`*_authorized_operations` bit fields). Principals are Kafka's strings `Type:name`
(`User:alice`, the wildcard `User:*`, the unauthenticated `User:ANONYMOUS`); hosts are IP
address strings or the wildcard `*`.

Filter matching follows Kafka's `ResourcePatternFilter`, `AccessControlEntryFilter` and
`AclBindingFilter`:

- a filter's ANY (type, pattern type, operation, permission) and its None name, principal or
  host match any value; principal and host filters otherwise match exactly (`User:*` in a
  filter matches only ACLs for `User:*`, not every principal);
- pattern type MATCH matches the patterns that would apply to the named resource: a LITERAL
  pattern with that name, the LITERAL wildcard `*`, and PREFIXED patterns whose name is a
  prefix of it. Pattern type ANY, or an exact pattern type, matches equal names only.

`new_binding_error` is the validation of a binding to be created (Kafka's `AclApis` and
`AclControlManager.validateNewAcl`); `filter_error` that of a DescribeAcls/DeleteAcls filter.

Deviation: Kafka's `ResourcePattern` and `AccessControlEntry` constructors throw on ANY/MATCH
values, so such a CreateAcls entry never reaches the authorizer; here the value types accept
any code (they are plain data decoded from the wire) and `new_binding_error` answers
INVALID_REQUEST for that one binding, as Kafka's controller does for UNKNOWN values.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final, TypeVar

E = TypeVar("E", bound=IntEnum)

WILDCARD_RESOURCE: Final = "*"  # a LITERAL pattern named `*` matches every name
WILDCARD_PRINCIPAL: Final = "User:*"
WILDCARD_HOST: Final = "*"
ANONYMOUS_PRINCIPAL: Final = "User:ANONYMOUS"
CLUSTER_NAME: Final = "kafka-cluster"  # the one name of the CLUSTER resource


class ResourceType(IntEnum):
    """Kafka's `ResourceType` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """Kafka's `PatternType` codes. ANY and MATCH exist in filters only."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """Kafka's `AclOperation` codes (also the bit positions of `*_authorized_operations`)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    """Kafka's `AclPermissionType` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """The resources an ACL applies to: one name (LITERAL, `*` for all) or a name prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (`principal` from `host`) may or may not (`permission_type`) do `operation`."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: PermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: an entry bound to a resource pattern."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Matches resource patterns (Kafka's `ResourcePatternFilter`)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if wanted in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that apply to the resource `self.name`
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def is_unknown(self) -> bool:
        return (
            self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN
        )

    def find_indefinite_field(self) -> str | None:
        """Why this filter may match more than one pattern, None when it cannot."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return f"Resource type is {self.resource_type.name}."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type in (PatternType.MATCH, PatternType.UNKNOWN):
            return f"Resource pattern type is {self.pattern_type.name}."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Matches access control entries (Kafka's `AccessControlEntryFilter`)."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: PermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (PermissionType.ANY, entry.permission_type)
        )

    def is_unknown(self) -> bool:
        return (
            self.operation == AclOperation.UNKNOWN or self.permission_type == PermissionType.UNKNOWN
        )

    def find_indefinite_field(self) -> str | None:
        """Why this filter may match more than one entry, None when it cannot."""
        if self.principal is None:
            return "Principal is NULL."
        if self.host is None:
            return "Host is NULL."
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Operation is {self.operation.name}."
        if self.permission_type in (PermissionType.ANY, PermissionType.UNKNOWN):
            return f"Permission type is {self.permission_type.name}."
        return None

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Matches ACL bindings: both the pattern and the entry filter must match."""

    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry
        )

    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown() or self.entry_filter.is_unknown()

    def find_indefinite_field(self) -> str | None:
        return (
            self.pattern_filter.find_indefinite_field() or self.entry_filter.find_indefinite_field()
        )

    def matches_at_most_one(self) -> bool:
        return self.find_indefinite_field() is None


ANY_PATTERN: Final = ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)
ANY_ENTRY: Final = AccessControlEntryFilter(None, None, AclOperation.ANY, PermissionType.ANY)
ANY_BINDING: Final = AclBindingFilter(ANY_PATTERN, ANY_ENTRY)


def exact_filter(binding: AclBinding) -> AclBindingFilter:
    """The filter that matches `binding` and nothing else (Kafka's `AclBinding.toFilter`)."""
    pattern, entry = binding.pattern, binding.entry
    return AclBindingFilter(
        ResourcePatternFilter(pattern.resource_type, pattern.name, pattern.pattern_type),
        AccessControlEntryFilter(
            entry.principal, entry.host, entry.operation, entry.permission_type
        ),
    )


def split_principal(principal: str) -> tuple[str, str] | None:
    """`Type:name` as (type, name), split at the first colon (Kafka's
    `SecurityUtils.parseKafkaPrincipal`); None when there is no colon or no type."""
    principal_type, colon, name = principal.partition(":")
    if not colon or not principal_type:
        return None
    return principal_type, name


def new_binding_error(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses `binding` (INVALID_REQUEST), None when it may be created.

    Kafka's rules: a concrete resource type, pattern type LITERAL or PREFIXED, a concrete
    operation (ALL is one) and permission (ALLOW or DENY), a non-empty resource name, the
    CLUSTER resource named `kafka-cluster`, a principal of the form `Type:name`. The wildcards
    `User:*`, host `*` and the LITERAL name `*` are valid ACL values."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission_type not in (PermissionType.ALLOW, PermissionType.DENY):
        return f"Invalid permissionType {entry.permission_type.name}"
    if not pattern.name:
        return "Resource name should not be empty"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if split_principal(entry.principal) is None:
        return f"Could not parse principal from `{entry.principal}`"
    return None


def filter_error(acl_filter: AclBindingFilter) -> str | None:
    """Why DescribeAcls/DeleteAcls refuse `acl_filter` (INVALID_REQUEST): an UNKNOWN field."""
    if acl_filter.pattern_filter.is_unknown():
        return "Unknown patternFilter."
    if acl_filter.entry_filter.is_unknown():
        return "Unknown entryFilter."
    return None


def from_code(enum: type[E], value: int) -> E:
    """`enum(value)`, or its UNKNOWN member for a code it does not know (Kafka's `fromCode`)."""
    try:
        return enum(value)
    except ValueError:
        return enum["UNKNOWN"]


def binding_of(
    resource_type: int, name: str, pattern_type: int, principal: str, host: str,
    operation: int, permission_type: int,
) -> AclBinding:  # fmt: skip
    """A binding from the fields of an ACL on the wire (CreateAcls, DescribeAcls, DeleteAcls);
    unknown codes become UNKNOWN."""
    return AclBinding(
        ResourcePattern(from_code(ResourceType, resource_type), name,
                        from_code(PatternType, pattern_type)),
        AccessControlEntry(principal, host, from_code(AclOperation, operation),
                           from_code(PermissionType, permission_type)),
    )  # fmt: skip
