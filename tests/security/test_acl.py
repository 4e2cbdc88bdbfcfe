"""The ACL model: Kafka's codes, filter matching (ANY, MATCH, None fields), `matches_at_most_one`
and the validation of bindings to create and of filters.

Cases follow Kafka's `ResourcePatternFilterTest`, `AclBindingTest` and
`AclControlManager.validateNewAcl`; the code is our own."""

from __future__ import annotations

import pytest

from onceflow.broker import authorized_ops
from onceflow.security.acl import (
    ANY_BINDING,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    exact_filter,
    filter_error,
    new_binding_error,
    split_principal,
)
from security.acl_helpers import (
    BOB,
    GROUP,
    LITERAL,
    PREFIXED,
    TOPIC,
    acl,
    allow,
    binding_filter,
    deny,
)

Op = AclOperation


def test_codes_are_kafkas():
    assert [(t.name, t.value) for t in ResourceType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("TOPIC", 2),
        ("GROUP", 3),
        ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5),
        ("DELEGATION_TOKEN", 6),
        ("USER", 7),
    ]
    assert [(t.name, t.value) for t in PatternType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("MATCH", 2),
        ("LITERAL", 3),
        ("PREFIXED", 4),
    ]
    assert [(t.name, t.value) for t in PermissionType] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("DENY", 2),
        ("ALLOW", 3),
    ]
    assert [op.name for op in Op] == [
        "UNKNOWN",
        "ANY",
        "ALL",
        "READ",
        "WRITE",
        "CREATE",
        "DELETE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "CREATE_TOKENS",
        "DESCRIBE_TOKENS",
    ]
    assert [op.value for op in Op] == list(range(15))


def test_broker_uses_the_one_definition():
    assert authorized_ops.AclOperation is AclOperation
    assert authorized_ops.ResourceType is ResourceType


def pattern(name: str, pattern_type: PatternType = LITERAL, rt: ResourceType = TOPIC):
    return ResourcePattern(rt, name, pattern_type)


# (filter resource type, filter name, filter pattern type, pattern, matches?)
PATTERN_FILTER_CASES = [
    # resource type
    (ResourceType.ANY, "t", PatternType.ANY, pattern("t"), True),
    (TOPIC, "t", PatternType.ANY, pattern("t"), True),
    (GROUP, "t", PatternType.ANY, pattern("t"), False),
    # None name matches any name, whatever the pattern type filter
    (TOPIC, None, PatternType.ANY, pattern("x", PREFIXED), True),
    (TOPIC, None, PatternType.MATCH, pattern("x", PREFIXED), True),
    (TOPIC, None, LITERAL, pattern("x"), True),
    (TOPIC, None, LITERAL, pattern("x", PREFIXED), False),
    # ANY and exact pattern types: equal names only, no wildcard or prefix logic
    (TOPIC, "t", PatternType.ANY, pattern("t", PREFIXED), True),
    (TOPIC, "topic", PatternType.ANY, pattern("to", PREFIXED), False),
    (TOPIC, "t", PatternType.ANY, pattern("*"), False),
    (TOPIC, "*", PatternType.ANY, pattern("*"), True),
    (TOPIC, "t", LITERAL, pattern("t"), True),
    (TOPIC, "t", LITERAL, pattern("*"), False),
    (TOPIC, "t", PREFIXED, pattern("t"), False),
    (TOPIC, "topic", PREFIXED, pattern("to", PREFIXED), False),
    (TOPIC, "to", PREFIXED, pattern("to", PREFIXED), True),
    # MATCH: what applies to the named resource
    (TOPIC, "topic", PatternType.MATCH, pattern("topic"), True),
    (TOPIC, "topic", PatternType.MATCH, pattern("*"), True),
    (TOPIC, "topic", PatternType.MATCH, pattern("top"), False),
    (TOPIC, "topic", PatternType.MATCH, pattern("top", PREFIXED), True),
    (TOPIC, "topic", PatternType.MATCH, pattern("topic", PREFIXED), True),
    (TOPIC, "topic", PatternType.MATCH, pattern("topics", PREFIXED), False),
    (TOPIC, "topic", PatternType.MATCH, pattern("*", PREFIXED), False),
    (TOPIC, "*", PatternType.MATCH, pattern("*"), True),
    (TOPIC, "*", PatternType.MATCH, pattern("t"), False),
    (TOPIC, "", PatternType.MATCH, pattern("*"), True),
    (GROUP, "topic", PatternType.MATCH, pattern("topic"), False),
]


@pytest.mark.parametrize(("rt", "name", "pt", "target", "expected"), PATTERN_FILTER_CASES)
def test_resource_pattern_filter_matches(rt, name, pt, target, expected):
    assert ResourcePatternFilter(rt, name, pt).matches(target) is expected


def test_entry_filter_matches_exact_values_or_anything():
    binding = allow(Op.READ, principal="User:*", host="*")
    assert ANY_BINDING.matches(binding)
    assert binding_filter(principal="User:*", host="*").matches(binding)
    # a filter's principal and host are not wildcards: User:alice does not match User:*
    assert not binding_filter(principal="User:alice").matches(binding)
    assert not binding_filter(host="10.0.0.1").matches(binding)
    assert binding_filter(operation=Op.READ, permission=PermissionType.ALLOW).matches(binding)
    assert not binding_filter(operation=Op.ALL).matches(binding)  # ALL is a value here
    assert not binding_filter(permission=PermissionType.DENY).matches(binding)
    assert exact_filter(binding).matches(binding)
    assert not exact_filter(binding).matches(deny(Op.READ, principal="User:*"))


@pytest.mark.parametrize(
    ("acl_filter", "indefinite"),
    [
        (ANY_BINDING, "Resource type is ANY."),
        (binding_filter(TOPIC), "Resource name is NULL."),
        (binding_filter(TOPIC, "t", PatternType.MATCH), "Resource pattern type is MATCH."),
        (binding_filter(TOPIC, "t", LITERAL), "Principal is NULL."),
        (binding_filter(TOPIC, "t", LITERAL, BOB), "Host is NULL."),
        (binding_filter(TOPIC, "t", LITERAL, BOB, "*"), "Operation is ANY."),
        (
            binding_filter(TOPIC, "t", LITERAL, BOB, "*", Op.READ),
            "Permission type is ANY.",
        ),
        (binding_filter(TOPIC, "t", LITERAL, BOB, "*", Op.READ, PermissionType.DENY), None),
        # Kafka does not count a pattern type ANY as indefinite
        (binding_filter(TOPIC, "t", PatternType.ANY, BOB, "*", Op.ALL, PermissionType.DENY), None),
    ],
)
def test_matches_at_most_one(acl_filter, indefinite):
    assert acl_filter.find_indefinite_field() == indefinite
    assert acl_filter.matches_at_most_one() is (indefinite is None)


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (allow(Op.READ), None),
        (deny(Op.ALL, "pre", pattern_type=PREFIXED), None),
        (allow(Op.READ, "*", principal="User:*", host="*"), None),  # wildcards are valid ACLs
        (allow(Op.READ, principal="User:ANONYMOUS"), None),
        (allow(Op.READ, principal="Group:"), None),  # Kafka splits at the first colon
        (allow(Op.CREATE, "kafka-cluster", resource_type=ResourceType.CLUSTER), None),
        (allow(Op.READ, resource_type=ResourceType.ANY), "Invalid resourceType ANY"),
        (allow(Op.READ, resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (allow(Op.READ, pattern_type=PatternType.ANY), "Invalid patternType ANY"),
        (allow(Op.READ, pattern_type=PatternType.MATCH), "Invalid patternType MATCH"),
        (allow(Op.READ, pattern_type=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
        (allow(Op.ANY), "Invalid operation ANY"),
        (allow(Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (acl(PermissionType.ANY, Op.READ), "Invalid permissionType ANY"),
        (acl(PermissionType.UNKNOWN, Op.READ), "Invalid permissionType UNKNOWN"),
        (allow(Op.READ, ""), "Resource name should not be empty"),
        (allow(Op.READ, "", pattern_type=PREFIXED), "Resource name should not be empty"),
        (
            allow(Op.CREATE, "c", resource_type=ResourceType.CLUSTER),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (allow(Op.READ, principal="alice"), "Could not parse principal from `alice`"),
        (allow(Op.READ, principal=":alice"), "Could not parse principal from `:alice`"),
    ],
)
def test_new_binding_error(binding, reason):
    assert new_binding_error(binding) == reason


def test_split_principal():
    assert split_principal("User:alice") == ("User", "alice")
    assert split_principal("User:CN=a:b") == ("User", "CN=a:b")
    assert split_principal("User:*") == ("User", "*")
    assert split_principal("alice") is None


def test_filter_error_only_for_unknown_fields():
    assert filter_error(ANY_BINDING) is None
    assert filter_error(binding_filter(TOPIC, "t", PatternType.MATCH)) is None
    unknown_pattern = "Unknown patternFilter."
    assert filter_error(binding_filter(ResourceType.UNKNOWN)) == unknown_pattern
    assert filter_error(binding_filter(pattern_type=PatternType.UNKNOWN)) == unknown_pattern
    assert filter_error(binding_filter(operation=Op.UNKNOWN)) == "Unknown entryFilter."
    assert filter_error(binding_filter(permission=PermissionType.UNKNOWN)) == (
        "Unknown entryFilter."
    )
