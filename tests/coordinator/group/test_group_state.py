"""The group state table, the offsets-partition hash, and GroupMetadata's protocol rules."""

from __future__ import annotations

import itertools

import pytest

from onceflow.coordinator.group.config import GroupConfig
from onceflow.coordinator.group.group import GroupMetadata, subscribed_topics_of
from onceflow.coordinator.group.member import MemberMetadata
from onceflow.coordinator.group.state import (
    VALID_PREVIOUS,
    GroupState,
    IllegalGroupStateTransition,
    check_transition,
)
from onceflow.coordinator.partitioning import java_string_hashcode

S = GroupState
# Kafka's GroupMetadata table, written out independently of the module under test.
LEGAL = {
    (S.STABLE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.PREPARING_REBALANCE),
    (S.EMPTY, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, S.STABLE),
    (S.PREPARING_REBALANCE, S.EMPTY),
    (S.STABLE, S.DEAD),
    (S.PREPARING_REBALANCE, S.DEAD),
    (S.COMPLETING_REBALANCE, S.DEAD),
    (S.EMPTY, S.DEAD),
    (S.DEAD, S.DEAD),
}


@pytest.mark.parametrize("current,target", list(itertools.product(GroupState, repeat=2)))
def test_transition_table(current: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", 0)
    group.state = current
    if (current, target) in LEGAL:
        group.transition_to(target, 5)
        assert group.state is target and group.state_timestamp_ms == 5
    else:
        with pytest.raises(IllegalGroupStateTransition):
            group.transition_to(target, 5)
        assert group.state is current


def test_table_covers_every_state() -> None:
    assert set(VALID_PREVIOUS) == set(GroupState)
    with pytest.raises(IllegalGroupStateTransition, match="Stable -> Empty"):
        check_transition("g", S.STABLE, S.EMPTY)


def test_state_names_are_kafkas() -> None:
    assert [s.value for s in GroupState] == [
        "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead",
    ]  # fmt: skip
    assert GroupState.from_name("stable") is S.STABLE
    assert GroupState.from_name("nope") is None


@pytest.mark.parametrize(
    "text,expected",
    [("", 0), ("hello", 99162322), ("Aa", 2112), ("BB", 2112), ("polygenelubricants", -(2**31))],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_partition_for_uses_kafkas_abs() -> None:
    config = GroupConfig(offsets_topic_num_partitions=50)
    assert config.partition_for("hello") == 99162322 % 50
    assert config.partition_for("polygenelubricants") == 0  # Utils.abs(MIN_VALUE) == 0
    negative = "somegroup"
    assert java_string_hashcode(negative) < 0
    assert config.partition_for(negative) == abs(java_string_hashcode(negative)) % 50


def _member(member_id: str, *protocols: str) -> MemberMetadata:
    return MemberMetadata(
        member_id, None, "c", "h", 1000, 1000, "consumer", [(p, b"") for p in protocols]
    )


def test_protocol_selection_by_vote() -> None:
    group = GroupMetadata("g", 0)
    group.add(_member("a", "range", "roundrobin"), None)
    group.state = S.PREPARING_REBALANCE
    group.add(_member("b", "roundrobin", "range"), None)
    group.add(_member("c", "roundrobin"), None)
    assert sorted(group.candidate_protocols()) == ["roundrobin"]
    assert group.select_protocol() == "roundrobin"
    assert group.supports_protocols("consumer", ["roundrobin"])
    assert not group.supports_protocols("consumer", ["range"])  # c does not support it
    assert not group.supports_protocols("connect", ["roundrobin"])
    group.remove("c")
    assert group.select_protocol() == "range"  # tie 1-1: the leader's preference wins


def test_subscribed_topics_parse() -> None:
    assert subscribed_topics_of(b"\x00\x01\x00\x00\x00\x02\x00\x01a\x00\x02bb") == ["a", "bb"]
    assert subscribed_topics_of(b"\x00") is None
    assert subscribed_topics_of(b"\x00\x00\x00\x00\x00\x01\x00\x09ab") is None
