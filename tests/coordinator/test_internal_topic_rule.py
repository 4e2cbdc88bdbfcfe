"""The internal-topic rule: which topics, and the answer for each refused operation."""

from __future__ import annotations

import pytest

from onceflow.coordinator.group.config import OFFSETS_TOPIC
from onceflow.coordinator.internal_topics import (
    GROUP_METADATA_TOPIC,
    INTERNAL_TOPICS,
    TRANSACTION_STATE_TOPIC,
    TopicOperation,
    internal_topic_refusal,
    is_internal,
)
from onceflow.protocol.errors import ErrorCode

EXPECTED = {
    TopicOperation.CREATE: ErrorCode.INVALID_REQUEST,
    TopicOperation.DELETE: ErrorCode.INVALID_REQUEST,
    TopicOperation.CREATE_PARTITIONS: ErrorCode.INVALID_REQUEST,
    TopicOperation.DELETE_RECORDS: ErrorCode.INVALID_TOPIC_EXCEPTION,
    TopicOperation.PRODUCE: ErrorCode.INVALID_TOPIC_EXCEPTION,
}


def test_the_coordinators_use_the_same_names():
    assert INTERNAL_TOPICS == {OFFSETS_TOPIC, GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC}


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state"])
@pytest.mark.parametrize("operation", list(TopicOperation))
def test_every_operation_on_an_internal_topic_is_refused(name, operation):
    assert is_internal(name)
    error, message = internal_topic_refusal(name, operation)
    assert error == EXPECTED[operation]
    assert name in message


@pytest.mark.parametrize("name", ["orders", "__mine", "__consumer_offsets2", "", None])
@pytest.mark.parametrize("operation", list(TopicOperation))
def test_other_topics_pass(name, operation):
    assert not is_internal(name)
    assert internal_topic_refusal(name, operation) is None
