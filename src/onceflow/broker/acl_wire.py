"""CreateAcls/DescribeAcls/DeleteAcls entries as the ACL model's values (`security.acl`).

Unknown enum codes decode to UNKNOWN, as Kafka's `fromCode` does, so the authorizer's
validation answers INVALID_REQUEST for that entry instead of the request failing to decode.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from onceflow.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

E = TypeVar("E", bound=IntEnum)

NO_AUTHORIZER_MESSAGE = "No Authorizer is configured on the broker"


def code(enum: type[E], value: int) -> E:
    """`enum(value)`, or its UNKNOWN member for a code it does not know."""
    try:
        return enum(value)
    except ValueError:
        return enum["UNKNOWN"]


def binding_from_creation(creation) -> AclBinding:
    """A CreateAcls `AclCreation` as a binding."""
    return AclBinding(
        ResourcePattern(
            code(ResourceType, creation.resource_type),
            creation.resource_name,
            code(PatternType, creation.resource_pattern_type),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            code(AclOperation, creation.operation),
            code(PermissionType, creation.permission_type),
        ),
    )


def filter_from_wire(entry) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls `DeleteAclsFilter` as a binding filter."""
    return AclBindingFilter(
        ResourcePatternFilter(
            code(ResourceType, entry.resource_type_filter),
            entry.resource_name_filter,
            code(PatternType, entry.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            entry.principal_filter,
            entry.host_filter,
            code(AclOperation, entry.operation),
            code(PermissionType, entry.permission_type),
        ),
    )
