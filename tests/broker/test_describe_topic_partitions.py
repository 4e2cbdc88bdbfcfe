"""DescribeTopicPartitions (API 75, KIP-966) in-process: topics in name order, paged by
`response_partition_limit` with a cursor, errors and authorization as Kafka's handler."""

from __future__ import annotations

import asyncio

import pytest

from broker.authz_helpers import ALICE, creation, grant, open_authz_state
from broker.broker_helpers import call
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from onceflow.security.acl import AclOperation, ResourceType

_E = ErrorCode
_Request = DescribeTopicPartitionsRequest


def describe(state, names, limit=2000, cursor=None, principal=None):
    """(topics as (name, error, [partition indexes]), next cursor as (topic, partition))."""
    request = _Request(
        topics=[_Request.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=None if cursor is None else _Request.Cursor(
            topic_name=cursor[0], partition_index=cursor[1]
        ),
    )  # fmt: skip
    extra = {} if principal is None else {"principal": principal}
    response = asyncio.run(call(state, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request, **extra))
    topics = [
        (t.name, _E(t.error_code), [p.partition_index for p in t.partitions])
        for t in response.topics
    ]
    after = response.next_cursor
    return topics, None if after is None else (after.topic_name, after.partition_index)


@pytest.fixture
def three_topics(state):
    for name, partitions in (("b", 2), ("a", 3), ("c", 1)):
        state.logs.create_topic(name, partitions)
    return state


CASES = {
    "every topic, in name order": (
        ([], 2000, None),
        ([("a", _E.NONE, [0, 1, 2]), ("b", _E.NONE, [0, 1]), ("c", _E.NONE, [0])], None),
    ),
    "named, a set, unknown and illegal names answered": (
        (["c", "nope", "a", "c", "bad/name"], 2000, None),
        ([("a", _E.NONE, [0, 1, 2]), ("bad/name", _E.INVALID_TOPIC_EXCEPTION, []),
          ("c", _E.NONE, [0]), ("nope", _E.UNKNOWN_TOPIC_OR_PARTITION, [])], None),
    ),
    "a limit inside a topic: the cursor names the next partition": (
        ([], 4, None),
        ([("a", _E.NONE, [0, 1, 2]), ("b", _E.NONE, [0])], ("b", 1)),
    ),
    "going on from the cursor": (
        ([], 4, ("b", 1)),
        ([("b", _E.NONE, [1]), ("c", _E.NONE, [0])], None),
    ),
    "a limit at a topic's end: the cursor names the next topic": (
        ([], 3, None),
        ([("a", _E.NONE, [0, 1, 2])], ("b", 0)),
    ),
    "a limit of 0 lists one partition": (
        (["b"], 0, None),
        ([("b", _E.NONE, [0])], ("b", 1)),
    ),
    "a cursor topic among the named ones": (
        (["a", "c"], 2000, ("c", 0)),
        ([("c", _E.NONE, [0])], None),
    ),
    "a cursor topic not named fails the request": (
        (["a", "c"], 2000, ("b", 0)),
        ([("a", _E.INVALID_REQUEST, []), ("c", _E.INVALID_REQUEST, [])], None),
    ),
    "a negative cursor partition fails the request": (
        (["a"], 2000, ("a", -1)),
        ([("a", _E.INVALID_REQUEST, [])], None),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_describe_topic_partitions(three_topics, case):
    (names, limit, cursor), expected = CASES[case]
    assert describe(three_topics, names, limit, cursor) == expected


def test_partitions_as_kafka_describes_a_one_node_cluster(three_topics):
    request = _Request(topics=[_Request.TopicRequest(name="a")], response_partition_limit=10)
    response = asyncio.run(call(three_topics, ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request))
    (topic,) = response.topics
    assert topic.topic_id == three_topics.logs.topic("a").topic_id and not topic.is_internal
    for partition in topic.partitions:
        assert (partition.leader_id, partition.leader_epoch) == (1, 0)
        assert (partition.replica_nodes, partition.isr_nodes) == ([1], [1])
        assert (partition.eligible_leader_replicas, partition.last_known_elr) == ([], [])
        assert partition.offline_replicas == []


def test_the_broker_caps_the_limit(state_factory):
    state = state_factory(**{"max.request.partition.size.limit": 2})
    state.logs.create_topic("a", 3)
    assert describe(state, [], 2000) == ([("a", _E.NONE, [0, 1])], ("a", 2))


def test_topics_without_describe_are_hidden_or_refused(tmp_path):
    state = open_authz_state(tmp_path / "data")
    for name in ("visible", "hidden"):
        state.logs.create_topic(name, 1)
    grant(state, creation(ResourceType.TOPIC, "visible", AclOperation.DESCRIBE))
    assert describe(state, [], principal=ALICE) == ([("visible", _E.NONE, [0])], None)
    named = describe(state, ["hidden", "visible", "absent"], principal=ALICE)
    assert named == (
        [
            ("visible", _E.NONE, [0]),
            ("absent", _E.TOPIC_AUTHORIZATION_FAILED, []),
            ("hidden", _E.TOPIC_AUTHORIZATION_FAILED, []),
        ],
        None,
    )
    asyncio.run(state.close())
