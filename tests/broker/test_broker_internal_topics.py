"""Clients cannot delete, hand-create, grow, or write into `__consumer_offsets` and
`__transaction_state` (issue 8, defect 2): every handler that changes a topic refuses them,
and the topic is left as its coordinator made it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.broker_helpers import call, make_batch, produce_request
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_partitions import CreatePartitionsRequest
from onceflow.protocol.messages.create_topics import CreateTopicsRequest
from onceflow.protocol.messages.delete_topics import DeleteTopicsRequest
from onceflow.protocol.messages.metadata import MetadataRequest

INTERNAL = ["__consumer_offsets", "__transaction_state"]
ZERO_UUID = uuid.UUID(int=0)


def run(state, api_key, version, request):
    return asyncio.run(call(state, api_key, version, request))


@pytest.fixture
def internal_state(state):
    """A broker state where both internal topics exist, as their coordinators make them."""
    for name in INTERNAL:
        state.logs.create_topic(name, 5, {"cleanup.policy": "compact"})
    state.logs.create_topic("plain", 1)
    return state


def _partitions(state) -> dict[str, int | None]:
    return {
        name: (info.partitions if (info := state.logs.topic(name)) else None) for name in INTERNAL
    }


@pytest.mark.parametrize("version", [1, 5, 6])
def test_delete_topics_refuses_internal_topics(internal_state, version):
    state = internal_state
    if version >= 6:
        topic = DeleteTopicsRequest.DeleteTopicState
        by_id = state.logs.topic("__transaction_state").topic_id
        request = DeleteTopicsRequest(
            topics=[
                topic(name="__consumer_offsets", topic_id=ZERO_UUID),
                topic(name=None, topic_id=by_id),
                topic(name="plain", topic_id=ZERO_UUID),
            ],
            timeout_ms=1000,
        )
    else:
        request = DeleteTopicsRequest(topic_names=[*INTERNAL, "plain"], timeout_ms=1000)
    response = run(state, ApiKey.DELETE_TOPICS, version, request)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("__consumer_offsets", ErrorCode.INVALID_REQUEST),
        ("__transaction_state", ErrorCode.INVALID_REQUEST),
        ("plain", ErrorCode.NONE),
    ]
    if version >= 5:
        assert response.responses[0].error_message == (
            "Deletion of internal topic __consumer_offsets is prohibited."
        )
    assert _partitions(state) == {name: 5 for name in INTERNAL}
    assert state.logs.topic("plain") is None


@pytest.mark.parametrize("exists", [False, True])
@pytest.mark.parametrize("validate_only", [False, True])
def test_create_topics_refuses_internal_names(state, exists, validate_only):
    if exists:
        state.logs.create_topic("__transaction_state", 5)
    topic = CreateTopicsRequest.CreatableTopic
    request = CreateTopicsRequest(
        topics=[
            topic(name=name, num_partitions=3, replication_factor=1, assignments=[], configs=[])
            for name in [*INTERNAL, "plain"]
        ],
        timeout_ms=1000,
        validate_only=validate_only,
    )
    response = run(state, ApiKey.CREATE_TOPICS, 7, request)
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        (
            "__consumer_offsets",
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __consumer_offsets is prohibited.",
        ),
        (
            "__transaction_state",
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __transaction_state is prohibited.",
        ),
        ("plain", ErrorCode.NONE, None),
    ]
    assert _partitions(state) == {
        "__consumer_offsets": None,
        "__transaction_state": 5 if exists else None,
    }


def test_create_partitions_refuses_internal_topics(internal_state):
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(
        topics=[topic(name=name, count=8, assignments=None) for name in [*INTERNAL, "plain"]],
        timeout_ms=1000,
        validate_only=False,
    )
    response = run(internal_state, ApiKey.CREATE_PARTITIONS, 3, request)
    assert [(r.name, r.error_code) for r in response.results] == [
        ("__consumer_offsets", ErrorCode.INVALID_REQUEST),
        ("__transaction_state", ErrorCode.INVALID_REQUEST),
        ("plain", ErrorCode.NONE),
    ]
    assert _partitions(internal_state) == {name: 5 for name in INTERNAL}


@pytest.mark.parametrize("name", INTERNAL)
def test_produce_to_an_internal_topic_is_invalid_topic(internal_state, name):
    state = internal_state
    before = state.get_log(name, 0).log_end_offset
    request = produce_request(name, {0: bytes(make_batch([b"garbage"]))})
    response = run(state, ApiKey.PRODUCE, 9, request)
    (partition,) = response.responses[0].partition_responses
    assert partition.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert partition.error_message == f"Cannot append to internal topic {name}"
    assert state.get_log(name, 0).log_end_offset == before


def test_metadata_never_auto_creates_an_internal_topic(state):
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name) for name in INTERNAL],
        allow_auto_topic_creation=True,
    )
    response = run(state, ApiKey.METADATA, 12, request)
    assert [(t.name, t.error_code) for t in response.topics] == [
        (name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for name in INTERNAL
    ]
    assert _partitions(state) == {name: None for name in INTERNAL}


def test_metadata_marks_only_kafkas_internal_topics_internal(internal_state):
    internal_state.logs.create_topic("__mine", 1)
    response = run(internal_state, ApiKey.METADATA, 12, MetadataRequest(topics=None))
    flags = {t.name: t.is_internal for t in response.topics}
    assert flags == {
        "__consumer_offsets": True,
        "__transaction_state": True,
        "plain": False,
        "__mine": False,
    }
