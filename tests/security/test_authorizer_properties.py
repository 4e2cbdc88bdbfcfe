"""Property tests: the indexed AclAuthorizer against a plain scan over the ACL list that states
Kafka's rules directly (the reference lives here, on purpose independent of the index), over
random ACL sets on a small alphabet so that literal names, `*` and prefixes collide often."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from onceflow.security.authorizer import AclAuthorizer
from security.acl_helpers import binding_filter

Op = AclOperation
DENY, ALLOW = PermissionType.DENY, PermissionType.ALLOW
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["h1", "h2", "*"]
# the operations with implications and a few without, so that random sets hit the rules often
OPS = [Op.READ, Op.WRITE, Op.ALTER, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CREATE]
RESOURCE_TYPES = [ResourceType.TOPIC, ResourceType.GROUP]

# few names, so that requests often hit ACL names, their prefixes and the wildcard
names = st.one_of(st.text(alphabet="ab", max_size=3), st.just("*"), st.just("a*"))
bindings = st.builds(
    AclBinding,
    st.builds(ResourcePattern, st.sampled_from(RESOURCE_TYPES), names.filter(bool),
              st.sampled_from([LITERAL, PREFIXED])),
    st.builds(AccessControlEntry, st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS),
              st.sampled_from([*OPS, Op.ALL]), st.sampled_from([DENY, ALLOW])),
)  # fmt: skip
acl_sets = st.lists(bindings, max_size=40)
requests = st.tuples(
    st.sampled_from(["User:alice", "User:alice", "User:bob", "User:carol"]),
    st.sampled_from(["h1", "h2"]),
    st.sampled_from(OPS),
    st.sampled_from(RESOURCE_TYPES),
    names,
)
filters = st.builds(
    binding_filter,
    st.sampled_from([ResourceType.ANY, *RESOURCE_TYPES]),
    st.one_of(st.none(), names),
    st.sampled_from([PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED]),
    st.sampled_from([None, *PRINCIPALS]),
    st.sampled_from([None, *HOSTS]),
    st.sampled_from([Op.ANY, Op.ALL, *OPS]),
    st.sampled_from([PermissionType.ANY, DENY, ALLOW]),
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference_authorize(acls, allow_everyone, principal, host, operation, rt, name) -> bool:
    """Kafka's StandardAuthorizer rules as a scan (no super users here)."""
    applicable = [
        b
        for b in acls
        if b.pattern.resource_type == rt
        and (
            (b.pattern.pattern_type == LITERAL and b.pattern.name in (name, "*"))
            or (b.pattern.pattern_type == PREFIXED and name.startswith(b.pattern.name))
        )
    ]
    if not applicable:
        return allow_everyone

    def operation_matches(entry: AccessControlEntry) -> bool:
        if entry.operation in (Op.ALL, operation):
            return True
        if entry.permission_type == DENY:  # implications apply to ALLOW ACLs only
            return False
        if operation == Op.DESCRIBE:
            return entry.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
        return operation == Op.DESCRIBE_CONFIGS and entry.operation == Op.ALTER_CONFIGS

    matching = [
        b.entry
        for b in applicable
        if b.entry.principal in (principal, "User:*")
        and b.entry.host in (host, "*")
        and operation_matches(b.entry)
    ]
    if any(e.permission_type == DENY for e in matching):
        return False
    return any(e.permission_type == ALLOW for e in matching)


@SETTINGS
@given(
    acls=acl_sets, allow_everyone=st.booleans(), asked=st.lists(requests, min_size=5, max_size=30)
)
def test_authorize_agrees_with_a_scan(acls, allow_everyone, asked):
    authorizer = AclAuthorizer(acls, allow_everyone_if_no_acl_found=allow_everyone)
    for request in asked:
        expected = reference_authorize(acls, allow_everyone, *request)
        assert authorizer.authorize(*request) is expected, request


@SETTINGS
@given(acls=acl_sets, acl_filter=filters)
def test_describe_agrees_with_a_scan(acls, acl_filter: AclBindingFilter):
    authorizer = AclAuthorizer(acls)
    expected = {b for b in acls if acl_filter.matches(b)}
    found = authorizer.acls(acl_filter)
    assert len(found) == len(set(found))
    assert set(found) == expected


@SETTINGS
@given(
    acls=acl_sets,
    added=acl_sets,
    deletions=st.lists(filters, max_size=3),
    asked=st.lists(requests, min_size=1, max_size=10),
)
def test_index_follows_creates_and_deletes(acls, added, deletions, asked):
    authorizer = AclAuthorizer(acls)
    authorizer.create_acls(added)
    results = authorizer.delete_acls(deletions)
    remaining = [b for b in dict.fromkeys(acls + added) if not any(f.matches(b) for f in deletions)]
    assert set(authorizer.bindings()) == set(remaining)
    assert len(authorizer) == len(remaining)
    for acl_filter, result in zip(deletions, results, strict=True):
        assert set(result.deleted) == {b for b in acls + added if acl_filter.matches(b)}
    for request in asked:
        assert authorizer.authorize(*request) is reference_authorize(remaining, False, *request)
