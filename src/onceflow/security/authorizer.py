"""The ACL authorizer: Kafka's `StandardAuthorizer` decisions over an indexed set of ACLs, and
the CreateAcls/DescribeAcls/DeleteAcls semantics on that set. Pure: no I/O (the set is made
durable by `security.acl_store`), not thread-safe (used from the event loop).

Decision (`authorize`), as Kafka's `StandardAuthorizerData.authorize`/`findResult`:

1. a principal listed in `super.users` is allowed everything;
2. the ACLs that apply to a resource are those of its type with pattern LITERAL and the same
   name, LITERAL `*`, or PREFIXED with a name that is a prefix of the resource name;
3. of those, an ACL matches the request when its principal is the caller's or `User:*`, its
   host is the caller's or `*`, and its operation matches:
   - ALL matches every operation, for ALLOW and DENY alike;
   - an ALLOW ACL also grants the operations it implies: DESCRIBE is granted by READ, WRITE,
     DELETE and ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS;
   - a DENY ACL denies its own operation only: a DENY READ does not deny DESCRIBE, and a DENY
     DESCRIBE does not deny READ (Kafka: "this rule only applies to ALLOW ACLs");
4. any matching DENY wins; else any matching ALLOW allows; else, when no ACL at all applies to
   the resource (whatever its principal, host or operation), `allow.everyone.if.no.acl.found`
   decides (default false); else denied.

Lookup cost: the ACLs are indexed by (resource type, pattern type, name); a request probes the
literal name, the literal wildcard, and one PREFIXED key per distinct prefix length stored for
the resource type (at most `len(name)` probes), then at most four (principal, host) keys per
applicable pattern. No scan over the ACL set.

Changes are two-phase, as the rest of onceflow: `prepare_create_acls`/`prepare_delete_acls`
compute the per-entry results and an `AclUpdate` without changing anything; the caller stores
`bindings_after(update)` durably, then `complete_update` applies it (or `abort_update` drops
it). One update may be pending at a time; preparing another meanwhile raises
`AclUpdatePendingError` (the caller serializes ACL changes). `create_acls`/`delete_acls` do both
phases at once, for callers without storage.

CreateAcls/DeleteAcls/DescribeAcls results follow Kafka's controller (`AclControlManager`) and
`AclApis`: a refused binding or filter gets INVALID_REQUEST with Kafka's message; creating an
existing ACL succeeds and changes nothing; each DeleteAcls filter lists every ACL it matches in
the set as it was before the request, so an ACL matched by two filters is listed by both.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from onceflow.protocol.errors import ErrorCode
from onceflow.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePatternFilter,
    ResourceType,
    filter_error,
    new_binding_error,
)

log = logging.getLogger(__name__)

SUPER_USERS_CONFIG: Final = "super.users"
ALLOW_EVERYONE_CONFIG: Final = "allow.everyone.if.no.acl.found"

_Op = AclOperation

# the ALLOW ACL operations that grant an operation besides itself and ALL (Kafka's
# IMPLIES_DESCRIBE and IMPLIES_DESCRIBE_CONFIGS); DENY ACLs have no implications
IMPLIED_BY: Final[Mapping[AclOperation, frozenset[AclOperation]]] = MappingProxyType(
    {
        _Op.DESCRIBE: frozenset({_Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
        _Op.DESCRIBE_CONFIGS: frozenset({_Op.ALTER_CONFIGS}),
    }
)

# every operation -> the ALLOW ACL operations that grant it
_GRANTED_BY: Final[Mapping[AclOperation, frozenset[AclOperation]]] = MappingProxyType(
    {op: frozenset({op, _Op.ALL}) | IMPLIED_BY.get(op, frozenset()) for op in AclOperation}
)

_LITERAL = PatternType.LITERAL
_PREFIXED = PatternType.PREFIXED
_DENY = PermissionType.DENY

_Key = tuple[ResourceType, PatternType, str]  # an index key: a ResourcePattern as a tuple
_Who = tuple[str, str]  # (principal, host)


class AclUpdatePendingError(RuntimeError):
    """An ACL change was prepared while another is still pending (a caller bug)."""


@dataclass(frozen=True, slots=True)
class AclCreateResult:
    """The outcome of one CreateAcls entry."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    """The outcome of one DeleteAcls filter: the ACLs it deleted, or why it was refused."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    deleted: tuple[AclBinding, ...] = ()


@dataclass(frozen=True, slots=True)
class AclUpdate:
    """A prepared change of the ACL set: bindings to add and to remove."""

    added: tuple[AclBinding, ...] = ()
    removed: tuple[AclBinding, ...] = ()


@dataclass(slots=True)
class _PatternAcls:
    """The ACLs of one resource pattern, by (principal, host): (denied ops, allowed ops)."""

    bindings: dict[AclBinding, None] = field(default_factory=dict)
    by_who: dict[_Who, tuple[set[AclOperation], set[AclOperation]]] = field(default_factory=dict)


def _key(binding: AclBinding) -> _Key:
    pattern = binding.pattern
    return (pattern.resource_type, pattern.pattern_type, pattern.name)


class AclAuthorizer:
    """Kafka's StandardAuthorizer over an in-memory, indexed ACL set."""

    def __init__(
        self,
        bindings: Iterable[AclBinding] = (),
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ):
        self.super_users: frozenset[str] = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._patterns: dict[_Key, _PatternAcls] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}  # sorted, distinct
        self._prefix_length_uses: dict[tuple[ResourceType, int], int] = {}
        self._count = 0
        self._pending: AclUpdate | None = None
        for binding in bindings:
            reason = new_binding_error(binding)
            if reason is not None:
                raise ValueError(f"invalid ACL {binding}: {reason}")
            self._add(binding)

    @classmethod
    def from_config(
        cls, config: Mapping[str, object], bindings: Iterable[AclBinding] = ()
    ) -> AclAuthorizer:
        """Built from Kafka's `super.users` (`User:a;User:b`) and
        `allow.everyone.if.no.acl.found` (true/false) settings."""
        users = str(config.get(SUPER_USERS_CONFIG) or "")
        allow = str(config.get(ALLOW_EVERYONE_CONFIG, "false")).strip().lower()
        if allow not in ("true", "false"):
            raise ValueError(f"{ALLOW_EVERYONE_CONFIG} must be true or false, not {allow!r}")
        return cls(
            bindings,
            super_users=(u.strip() for u in users.split(";") if u.strip()),
            allow_everyone_if_no_acl_found=allow == "true",
        )

    def __len__(self) -> int:
        return self._count

    def bindings(self) -> list[AclBinding]:
        """Every ACL, grouped by resource pattern."""
        return [b for acls in self._patterns.values() for b in acls.bindings]

    # -- decisions -----------------------------------------------------------------------------

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """May `principal`, connected from `host`, perform `operation` on the resource?"""
        if principal in self.super_users:
            return True
        whos = (
            (principal, host),
            (principal, WILDCARD_HOST),
            (WILDCARD_PRINCIPAL, host),
            (WILDCARD_PRINCIPAL, WILDCARD_HOST),
        )
        granted_by = _GRANTED_BY[operation]
        applicable = allowed = False
        for acls in self._applicable(resource_type, resource_name):
            applicable = True
            by_who = acls.by_who
            for who in whos:
                ops = by_who.get(who)
                if ops is None:
                    continue
                denied, allowed_ops = ops
                if denied and (operation in denied or _Op.ALL in denied):
                    return False
                if not allowed and not granted_by.isdisjoint(allowed_ops):
                    allowed = True
        return allowed or (not applicable and self.allow_everyone_if_no_acl_found)

    def authorize_many(
        self,
        principal: str,
        host: str,
        actions: Iterable[tuple[AclOperation, ResourceType, str]],
    ) -> list[bool]:
        """`authorize` for each (operation, resource type, resource name) of one caller."""
        return [self.authorize(principal, host, op, rt, name) for op, rt, name in actions]

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the caller perform `operation` on some resource of `resource_type`? (Kafka's
        `Authorizer.authorizeByResourceType`: an ALLOW pattern for the caller that no DENY
        pattern for the caller covers; a LITERAL `*` DENY covers everything.) A scan over the
        type's ACLs: for rare requests (an idempotent InitProducerId) only."""
        if principal in self.super_users:
            return True
        whos = {(principal, host), (principal, WILDCARD_HOST)}
        whos |= {(WILDCARD_PRINCIPAL, host), (WILDCARD_PRINCIPAL, WILDCARD_HOST)}
        granted_by = _GRANTED_BY[operation]
        allows: list[tuple[PatternType, str]] = []
        denies: list[tuple[PatternType, str]] = []
        any_acl = False
        for (rtype, pattern_type, name), acls in self._patterns.items():
            if rtype != resource_type:
                continue
            any_acl = True
            for who in whos.intersection(acls.by_who):
                denied, allowed = acls.by_who[who]
                if operation in denied or _Op.ALL in denied:
                    denies.append((pattern_type, name))
                if not granted_by.isdisjoint(allowed):
                    allows.append((pattern_type, name))
        if not any_acl:
            return self.allow_everyone_if_no_acl_found
        if (_LITERAL, WILDCARD_RESOURCE) in denies:
            return False

        def covered(pattern_type: PatternType, name: str) -> bool:
            return any(
                (d_type == _PREFIXED and name.startswith(d_name))
                or (d_type == pattern_type == _LITERAL and d_name == name)
                for d_type, d_name in denies
            )

        return any(not covered(t, n) for t, n in allows)

    def _applicable(self, resource_type: ResourceType, name: str) -> Iterator[_PatternAcls]:
        """The ACL groups whose pattern applies to the resource `name` of `resource_type`."""
        patterns = self._patterns
        acls = patterns.get((resource_type, _LITERAL, name))
        if acls is not None:
            yield acls
        if name != WILDCARD_RESOURCE:
            acls = patterns.get((resource_type, _LITERAL, WILDCARD_RESOURCE))
            if acls is not None:
                yield acls
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            acls = patterns.get((resource_type, _PREFIXED, name[:length]))
            if acls is not None:
                yield acls

    # -- DescribeAcls ---------------------------------------------------------------------------

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs `acl_filter` matches."""
        candidates = self._candidates(acl_filter.pattern_filter)
        return [b for acls in candidates for b in acls.bindings if acl_filter.matches(b)]

    def describe_acls(
        self, acl_filter: AclBindingFilter
    ) -> tuple[ErrorCode, str | None, list[AclBinding]]:
        """DescribeAcls: (error code, error message, the matching ACLs)."""
        reason = filter_error(acl_filter)
        if reason is not None:
            log.info("DescribeAcls refused %s: %s", acl_filter, reason)
            return ErrorCode.INVALID_REQUEST, reason, []
        return ErrorCode.NONE, None, self.acls(acl_filter)

    def _candidates(self, pattern_filter: ResourcePatternFilter) -> Iterable[_PatternAcls]:
        """The ACL groups that may match `pattern_filter`: found by key when the filter names
        one resource type and name, all of them otherwise."""
        resource_type, name = pattern_filter.resource_type, pattern_filter.name
        if name is None or resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return self._patterns.values()
        pattern_type = pattern_filter.pattern_type
        if pattern_type == PatternType.MATCH:
            return self._applicable(resource_type, name)
        types = (_LITERAL, _PREFIXED) if pattern_type == PatternType.ANY else (pattern_type,)
        found = (self._patterns.get((resource_type, t, name)) for t in types)
        return [acls for acls in found if acls is not None]

    # -- CreateAcls and DeleteAcls ----------------------------------------------------------------

    def prepare_create_acls(
        self, bindings: Iterable[AclBinding]
    ) -> tuple[list[AclCreateResult], AclUpdate]:
        """CreateAcls, without applying it: a result per binding and the update to store."""
        self._check_no_pending()
        results: list[AclCreateResult] = []
        added: dict[AclBinding, None] = {}
        for binding in bindings:
            reason = new_binding_error(binding)
            if reason is not None:
                log.info("CreateAcls refused %s: %s", binding, reason)
                results.append(AclCreateResult(ErrorCode.INVALID_REQUEST, reason))
                continue
            if not self._contains(binding):
                added[binding] = None
            results.append(AclCreateResult())
        return results, self._pend(AclUpdate(added=tuple(added)))

    def prepare_delete_acls(
        self, filters: Iterable[AclBindingFilter]
    ) -> tuple[list[AclDeleteResult], AclUpdate]:
        """DeleteAcls, without applying it: a result per filter and the update to store."""
        self._check_no_pending()
        results: list[AclDeleteResult] = []
        removed: dict[AclBinding, None] = {}
        for acl_filter in filters:
            reason = filter_error(acl_filter)
            if reason is not None:
                log.info("DeleteAcls refused %s: %s", acl_filter, reason)
                results.append(AclDeleteResult(ErrorCode.INVALID_REQUEST, reason))
                continue
            matched = self.acls(acl_filter)
            removed.update(dict.fromkeys(matched))
            results.append(AclDeleteResult(deleted=tuple(matched)))
        return results, self._pend(AclUpdate(removed=tuple(removed)))

    def bindings_after(self, update: AclUpdate) -> list[AclBinding]:
        """The whole ACL set as it will be once `update` is applied (what to store)."""
        removed = set(update.removed)
        kept = [b for b in self.bindings() if b not in removed]
        return kept + [b for b in update.added if b not in removed]

    def complete_update(self, update: AclUpdate) -> None:
        """Apply the pending `update` (after it was stored)."""
        if update is not self._pending:
            raise AclUpdatePendingError("complete_update: this update is not the pending one")
        self._pending = None
        for binding in update.removed:
            self._remove(binding)
        for binding in update.added:
            self._add(binding)

    def abort_update(self, update: AclUpdate) -> None:
        """Drop the pending `update` (its storage failed)."""
        if update is self._pending:
            self._pending = None

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[AclCreateResult]:
        """CreateAcls applied at once (no storage)."""
        results, update = self.prepare_create_acls(bindings)
        self.complete_update(update)
        return results

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[AclDeleteResult]:
        """DeleteAcls applied at once (no storage)."""
        results, update = self.prepare_delete_acls(filters)
        self.complete_update(update)
        return results

    def _check_no_pending(self) -> None:
        if self._pending is not None:
            raise AclUpdatePendingError("an ACL update is already pending")

    def _pend(self, update: AclUpdate) -> AclUpdate:
        self._pending = update
        return update

    # -- the index ------------------------------------------------------------------------------

    def _contains(self, binding: AclBinding) -> bool:
        acls = self._patterns.get(_key(binding))
        return acls is not None and binding in acls.bindings

    def _add(self, binding: AclBinding) -> None:
        key = _key(binding)
        acls = self._patterns.get(key)
        if acls is None:
            acls = self._patterns[key] = _PatternAcls()
            if binding.pattern.pattern_type == _PREFIXED:
                self._use_prefix_length(binding.pattern.resource_type, len(binding.pattern.name), 1)
        elif binding in acls.bindings:
            return
        acls.bindings[binding] = None
        entry = binding.entry
        who = (entry.principal, entry.host)
        ops = acls.by_who.get(who)
        if ops is None:
            ops = acls.by_who[who] = (set(), set())
        ops[0 if entry.permission_type == _DENY else 1].add(entry.operation)
        self._count += 1

    def _remove(self, binding: AclBinding) -> None:
        key = _key(binding)
        acls = self._patterns.get(key)
        if acls is None or binding not in acls.bindings:
            return
        del acls.bindings[binding]
        entry = binding.entry
        who = (entry.principal, entry.host)
        ops = acls.by_who[who]
        ops[0 if entry.permission_type == _DENY else 1].discard(entry.operation)
        if not ops[0] and not ops[1]:
            del acls.by_who[who]
        if not acls.bindings:
            del self._patterns[key]
            if binding.pattern.pattern_type == _PREFIXED:
                self._use_prefix_length(
                    binding.pattern.resource_type, len(binding.pattern.name), -1
                )
        self._count -= 1

    def _use_prefix_length(self, resource_type: ResourceType, length: int, delta: int) -> None:
        """Count a PREFIXED pattern of `length` in or out; keep the sorted distinct lengths."""
        uses_key = (resource_type, length)
        uses = self._prefix_length_uses.get(uses_key, 0) + delta
        lengths = self._prefix_lengths.setdefault(resource_type, [])
        if uses == 0:
            del self._prefix_length_uses[uses_key]
            lengths.remove(length)
        else:
            self._prefix_length_uses[uses_key] = uses
            if uses == 1 and delta == 1:
                bisect.insort(lengths, length)
