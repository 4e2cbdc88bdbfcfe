"""AclAuthorizer decisions (Kafka's StandardAuthorizer rules) and its CreateAcls, DescribeAcls
and DeleteAcls semantics.

Decision cases follow Kafka's `StandardAuthorizerTest` and `StandardAuthorizerData.findResult`
(implications for ALLOW only, DENY wins, wildcards, prefixes, super users, the no-ACL rule); the
code is our own."""

from __future__ import annotations

import pytest

from onceflow.protocol.errors import ErrorCode
from onceflow.security.acl import (
    ANY_BINDING,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from onceflow.security.authorizer import (
    AclAuthorizer,
    AclCreateResult,
    AclUpdatePendingError,
)
from security.acl_helpers import (
    ALICE,
    BOB,
    GROUP,
    HOST,
    LITERAL,
    OTHER_HOST,
    PREFIXED,
    TOPIC,
    allow,
    binding_filter,
    deny,
)

Op = AclOperation
CONCRETE_OPS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY, Op.ALL)]


def decide(acls, operation=Op.READ, name="t", principal=ALICE, host=HOST, rt=TOPIC, **kw):
    return AclAuthorizer(acls, **kw).authorize(principal, host, operation, rt, name)


# ALLOW ACL operation -> the operations it grants besides itself
IMPLIED = {
    Op.READ: {Op.DESCRIBE},
    Op.WRITE: {Op.DESCRIBE},
    Op.DELETE: {Op.DESCRIBE},
    Op.ALTER: {Op.DESCRIBE},
    Op.ALTER_CONFIGS: {Op.DESCRIBE_CONFIGS},
    Op.ALL: set(CONCRETE_OPS),
}


@pytest.mark.parametrize("acl_op", [*CONCRETE_OPS, Op.ALL])
@pytest.mark.parametrize("requested", CONCRETE_OPS)
def test_allow_grants_its_operation_and_implied_ones(acl_op, requested):
    expected = requested == acl_op or requested in IMPLIED.get(acl_op, set())
    assert decide([allow(acl_op)], requested) is expected


@pytest.mark.parametrize("acl_op", [*CONCRETE_OPS, Op.ALL])
@pytest.mark.parametrize("requested", CONCRETE_OPS)
def test_deny_denies_its_operation_only_or_all(acl_op, requested):
    """Kafka: the implications apply to ALLOW ACLs only; a DENY READ does not deny DESCRIBE and
    a DENY DESCRIBE does not deny READ. An ALLOW ALL shows what the DENY takes away."""
    denied = acl_op in (Op.ALL, requested)
    assert decide([allow(Op.ALL), deny(acl_op)], requested) is not denied


PATTERNS = [
    {"name": "t"},
    {"name": "*"},
    {"name": "t", "pattern_type": PREFIXED},
]


@pytest.mark.parametrize("grant", PATTERNS)
@pytest.mark.parametrize("denial", PATTERNS)
def test_deny_beats_allow_on_every_kind_of_pattern(grant, denial):
    assert decide([allow(Op.READ, **grant)]) is True
    assert decide([allow(Op.READ, **grant), deny(Op.READ, **denial)]) is False


@pytest.mark.parametrize(
    ("acl_principal", "acl_host", "principal", "host", "expected"),
    [
        (ALICE, HOST, ALICE, HOST, True),
        (ALICE, "*", ALICE, HOST, True),
        ("User:*", HOST, ALICE, HOST, True),
        ("User:*", "*", BOB, OTHER_HOST, True),
        (ALICE, HOST, ALICE, OTHER_HOST, False),
        (ALICE, "*", BOB, HOST, False),
        ("user:alice", "*", ALICE, HOST, False),  # principals are case-sensitive
        ("Group:*", "*", ALICE, HOST, False),  # only User:* is a wildcard
        ("User:*", "*", "User:ANONYMOUS", HOST, True),
        (ALICE, "10.0.0.*", ALICE, HOST, False),  # hosts are not patterns
    ],
)
def test_principal_and_host_match_exactly_or_by_wildcard(
    acl_principal, acl_host, principal, host, expected
):
    acls = [allow(Op.READ, principal=acl_principal, host=acl_host)]
    assert decide(acls, principal=principal, host=host) is expected


def test_wildcard_principal_deny_overrides_a_named_allow():
    acls = [allow(Op.WRITE), deny(Op.WRITE, principal="User:*", host=OTHER_HOST)]
    assert decide(acls, Op.WRITE, host=HOST) is True
    assert decide(acls, Op.WRITE, host=OTHER_HOST) is False


@pytest.mark.parametrize(
    ("acl_name", "pattern_type", "resource_name", "expected"),
    [
        ("t", LITERAL, "t", True),
        ("t", LITERAL, "tt", False),  # a literal name is not a prefix
        ("tt", LITERAL, "t", False),
        ("*", LITERAL, "anything", True),
        ("*", LITERAL, "", True),
        ("*", LITERAL, "*", True),
        ("*", PREFIXED, "anything", False),  # a PREFIXED `*` is the prefix "*"
        ("*", PREFIXED, "*topic", True),
        ("foo", PREFIXED, "foo", True),  # a prefix as long as the name
        ("foo", PREFIXED, "foobar", True),
        ("foo", PREFIXED, "fo", False),  # a prefix longer than the name
        ("foo", PREFIXED, "fob", False),
        ("foo", PREFIXED, "", False),
        ("foo", PREFIXED, "xfoo", False),
        ("fóo", PREFIXED, "fóo-1", True),  # non-ASCII names
    ],
)
def test_pattern_matching(acl_name, pattern_type, resource_name, expected):
    acls = [allow(Op.READ, acl_name, pattern_type=pattern_type)]
    assert decide(acls, name=resource_name) is expected


def test_many_prefix_lengths_only_the_prefixes_apply():
    acls = [allow(Op.READ, "a" * n + "x", pattern_type=PREFIXED) for n in range(1, 8)]
    acls += [
        deny(Op.READ, "aaab", pattern_type=PREFIXED),
        allow(Op.READ, "aa", pattern_type=PREFIXED),
    ]
    assert decide(acls, name="aaaax-1") is True
    assert decide(acls, name="aaab") is False
    assert decide(acls, name="a") is False  # no ACL applies, allow.everyone is false
    assert decide(acls, name="a", allow_everyone_if_no_acl_found=True) is True


def test_resource_types_are_separate():
    acls = [allow(Op.READ, "*", resource_type=GROUP), deny(Op.READ, "t", pattern_type=PREFIXED)]
    assert decide(acls, rt=GROUP) is True
    assert decide(acls, rt=TOPIC) is False
    assert decide(acls, rt=ResourceType.TRANSACTIONAL_ID, allow_everyone_if_no_acl_found=True)


def test_super_users_are_allowed_everything():
    acls = [deny(Op.ALL, "*", principal="User:*")]
    authorizer = AclAuthorizer.from_config({"super.users": " User:admin ;User:ops;;"}, acls)
    assert authorizer.super_users == {"User:admin", "User:ops"}
    assert authorizer.authorize("User:admin", HOST, Op.WRITE, TOPIC, "t")
    assert authorizer.authorize("User:ops", HOST, Op.CLUSTER_ACTION, ResourceType.CLUSTER, "c")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "t")
    # super.users is matched exactly: `User:*` there makes only a user named `*` super
    star = AclAuthorizer([], super_users=["User:*"])
    assert not star.authorize(ALICE, HOST, Op.READ, TOPIC, "t")


@pytest.mark.parametrize("allow_everyone", [False, True])
def test_no_acl_for_the_resource_falls_back_to_allow_everyone(allow_everyone):
    config = {"allow.everyone.if.no.acl.found": str(allow_everyone).lower()}
    # no ACL at all
    assert AclAuthorizer.from_config(config).authorize(ALICE, HOST, Op.READ, TOPIC, "t") is (
        allow_everyone
    )
    # ACLs on the resource for someone else or another operation: denied, whatever the setting
    for other in [
        allow(Op.READ, principal=BOB),
        allow(Op.WRITE, "*"),
        allow(Op.READ, host=OTHER_HOST),
        deny(Op.ALTER, "t", pattern_type=PREFIXED),
    ]:
        authorizer = AclAuthorizer.from_config(config, [other])
        assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "t") is False, other
    # an ACL on another resource does not count
    other_topic = AclAuthorizer.from_config(config, [allow(Op.READ, "u")])
    assert other_topic.authorize(ALICE, HOST, Op.READ, TOPIC, "t") is allow_everyone


def test_config_defaults_and_bad_values():
    authorizer = AclAuthorizer.from_config({})
    assert authorizer.super_users == frozenset()
    assert authorizer.allow_everyone_if_no_acl_found is False
    assert AclAuthorizer.from_config({"allow.everyone.if.no.acl.found": "TRUE"}).authorize(
        ALICE, HOST, Op.READ, TOPIC, "t"
    )
    with pytest.raises(ValueError, match="allow.everyone.if.no.acl.found"):
        AclAuthorizer.from_config({"allow.everyone.if.no.acl.found": "yes"})
    with pytest.raises(ValueError, match="Invalid patternType MATCH"):
        AclAuthorizer([allow(Op.READ, pattern_type=PatternType.MATCH)])


def test_authorize_many():
    authorizer = AclAuthorizer([allow(Op.READ, "a"), deny(Op.READ, "b")])
    actions = [(Op.READ, TOPIC, "a"), (Op.READ, TOPIC, "b"), (Op.DESCRIBE, TOPIC, "a")]
    assert authorizer.authorize_many(ALICE, HOST, actions) == [True, False, True]


# -- CreateAcls, DescribeAcls, DeleteAcls --------------------------------------------------------

ACLS = [
    allow(Op.READ, "orders"),
    allow(Op.WRITE, "orders", principal=BOB),
    deny(Op.READ, "*", principal="User:*", host=OTHER_HOST),
    allow(Op.READ, "ord", pattern_type=PREFIXED),
    allow(Op.DESCRIBE, "orders-eu", pattern_type=PREFIXED),
    allow(Op.READ, "g1", resource_type=GROUP),
]


def test_create_acls_results_and_duplicates():
    authorizer = AclAuthorizer()
    bad = allow(Op.READ, pattern_type=PatternType.MATCH)
    results = authorizer.create_acls([ACLS[0], bad, ACLS[0], ACLS[1]])
    assert results == [
        AclCreateResult(),
        AclCreateResult(ErrorCode.INVALID_REQUEST, "Invalid patternType MATCH"),
        AclCreateResult(),  # a duplicate in the request succeeds and changes nothing
        AclCreateResult(),
    ]
    assert authorizer.bindings() == ACLS[:2]
    assert authorizer.create_acls([ACLS[0]]) == [AclCreateResult()]  # already there
    assert len(authorizer) == 2
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")


def test_refused_create_changes_nothing():
    authorizer = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    results = authorizer.create_acls([deny(Op.ALL, "")])
    assert results[0].error_code == ErrorCode.INVALID_REQUEST
    assert len(authorizer) == 0
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "")


@pytest.mark.parametrize(
    ("acl_filter", "expected"),
    [
        (ANY_BINDING, ACLS),
        (binding_filter(TOPIC), ACLS[:5]),
        (binding_filter(GROUP, "g1", LITERAL), ACLS[5:]),
        (binding_filter(TOPIC, "orders"), ACLS[:2]),  # ANY pattern type: equal names
        (binding_filter(TOPIC, "orders", LITERAL), ACLS[:2]),
        (binding_filter(TOPIC, "ord", PREFIXED), [ACLS[3]]),
        (binding_filter(TOPIC, "ord", LITERAL), []),
        (binding_filter(TOPIC, "orders", PatternType.MATCH), ACLS[:4]),
        (binding_filter(TOPIC, "orders-eu-1", PatternType.MATCH), [ACLS[2], ACLS[3], ACLS[4]]),
        (binding_filter(TOPIC, "x", PatternType.MATCH), [ACLS[2]]),
        (binding_filter(principal=BOB), [ACLS[1]]),
        (binding_filter(principal="User:*"), [ACLS[2]]),
        (binding_filter(host=OTHER_HOST), [ACLS[2]]),
        (binding_filter(permission=PermissionType.DENY), [ACLS[2]]),
        (binding_filter(operation=Op.DESCRIBE), [ACLS[4]]),  # no implications in filters
        (binding_filter(TOPIC, None, PatternType.MATCH, operation=Op.READ), [ACLS[0], *ACLS[2:4]]),
    ],
)
def test_describe_acls(acl_filter, expected):
    error, message, found = AclAuthorizer(ACLS).describe_acls(acl_filter)
    assert (error, message) == (ErrorCode.NONE, None)
    assert sorted(found, key=ACLS.index) == expected


def test_describe_acls_refuses_unknown_fields():
    unknown = binding_filter(ResourceType.UNKNOWN)
    assert AclAuthorizer(ACLS).describe_acls(unknown) == (
        ErrorCode.INVALID_REQUEST,
        "Unknown patternFilter.",
        [],
    )


def test_delete_acls_per_filter_results():
    authorizer = AclAuthorizer(ACLS)
    results = authorizer.delete_acls(
        [
            binding_filter(TOPIC, "orders", PatternType.MATCH, operation=Op.READ),
            binding_filter(permission=PermissionType.UNKNOWN),
            binding_filter(TOPIC, "orders", LITERAL, principal=ALICE),
            binding_filter(TOPIC, "nothing", LITERAL),
        ]
    )
    assert [r.error_code for r in results] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.NONE,
        ErrorCode.NONE,
    ]
    assert results[1].error_message == "Unknown entryFilter."
    # each filter lists what it matched before the request: ACLS[0] is listed twice
    assert set(results[0].deleted) == {ACLS[0], ACLS[2], ACLS[3]}
    assert results[2].deleted == (ACLS[0],)
    assert results[3].deleted == ()
    assert authorizer.bindings() == [ACLS[1], ACLS[4], ACLS[5]]
    # the index follows: the wildcard DENY and the prefix are gone
    assert not authorizer.authorize(ALICE, OTHER_HOST, Op.READ, TOPIC, "ordx")
    assert authorizer.authorize(BOB, OTHER_HOST, Op.WRITE, TOPIC, "orders")
    assert authorizer.delete_acls([ANY_BINDING])[0].deleted == (ACLS[1], ACLS[4], ACLS[5])
    assert len(authorizer) == 0
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders") is False


def test_delete_then_recreate_a_prefix():
    prefix = deny(Op.READ, "ab", pattern_type=PREFIXED)
    authorizer = AclAuthorizer([prefix, allow(Op.READ, "*")])
    assert not authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "abc")
    authorizer.delete_acls([binding_filter(TOPIC, "ab", PREFIXED)])
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "abc")
    authorizer.create_acls([prefix])
    assert not authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "abc")


def test_two_phase_update():
    authorizer = AclAuthorizer([ACLS[0]])
    results, update = authorizer.prepare_create_acls([ACLS[1], ACLS[0]])
    assert results == [AclCreateResult(), AclCreateResult()]
    assert update.added == (ACLS[1],)
    assert authorizer.bindings() == [ACLS[0]]  # nothing applied yet
    assert authorizer.bindings_after(update) == [ACLS[0], ACLS[1]]
    with pytest.raises(AclUpdatePendingError):
        authorizer.prepare_delete_acls([ANY_BINDING])
    authorizer.complete_update(update)
    assert authorizer.bindings() == [ACLS[0], ACLS[1]]
    with pytest.raises(AclUpdatePendingError):
        authorizer.complete_update(update)  # not pending any more

    _, update = authorizer.prepare_delete_acls([binding_filter(principal=BOB)])
    assert authorizer.bindings_after(update) == [ACLS[0]]
    authorizer.abort_update(update)
    assert authorizer.bindings() == [ACLS[0], ACLS[1]]
    authorizer.prepare_create_acls([])  # nothing pending after an abort


def test_empty_resource_name_is_safe_to_ask():
    authorizer = AclAuthorizer([allow(Op.READ, "a", pattern_type=PREFIXED)])
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "") is False
    assert authorizer.acls(binding_filter(TOPIC, "", PatternType.MATCH)) == []
