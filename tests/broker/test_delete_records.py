"""DeleteRecords (API 21) in-process at every version: the log start offset moves, reads below
it are OFFSET_OUT_OF_RANGE, ListOffsets(earliest) answers it, errors follow Kafka."""

from __future__ import annotations

import asyncio

import pytest

from broker.broker_helpers import (
    call,
    create,
    decode_all,
    fetch_request,
    list_offsets_request,
    make_batch,
    produce_request,
)
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_records import DeleteRecordsRequest

_Topic = DeleteRecordsRequest.DeleteRecordsTopic


def delete_request(offsets: dict[tuple[str, int], int]) -> DeleteRecordsRequest:
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            _Topic.DeleteRecordsPartition(partition_index=partition, offset=offset)
        )
    return DeleteRecordsRequest(
        topics=[_Topic(name=n, partitions=ps) for n, ps in topics.items()], timeout_ms=1000
    )


def delete(state, version, offsets):
    response = asyncio.run(call(state, ApiKey.DELETE_RECORDS, version, delete_request(offsets)))
    return {
        (t.name, p.partition_index): (ErrorCode(p.error_code), p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }


def fill(state, topic, partition, n):
    for i in range(n):  # one batch per offset
        request = produce_request(topic, {partition: make_batch([b"v%d" % i])})
        asyncio.run(call(state, ApiKey.PRODUCE, 9, request))


def fetch(state, topic, partition, offset):
    response = asyncio.run(call(state, ApiKey.FETCH, 12, fetch_request(topic, {partition: offset})))
    return response.responses[0].partitions[0]


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_records_moves_the_log_start_offset(state, version):
    create(state, "t", 2)
    fill(state, "t", 0, 10)
    assert delete(state, version, {("t", 0): 4}) == {("t", 0): (ErrorCode.NONE, 4)}
    below = fetch(state, "t", 0, 2)
    assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at = fetch(state, "t", 0, 4)
    assert at.error_code == ErrorCode.NONE and at.log_start_offset == 4
    assert [offset for offset, _, _ in decode_all(at.records)][0] == 4
    earliest = asyncio.run(call(state, ApiKey.LIST_OFFSETS, 7, list_offsets_request("t", {0: -2})))
    assert earliest.topics[0].partitions[0].offset == 4
    # ListOffsets v8+ earliest-local (-4) is the same offset: every segment is local
    local = asyncio.run(call(state, ApiKey.LIST_OFFSETS, 8, list_offsets_request("t", {0: -4})))
    assert (local.topics[0].partitions[0].offset, local.topics[0].partitions[0].timestamp) == (
        4, -1,
    )  # fmt: skip
    # lower requests leave it where it is; -1 means the high watermark; partitions independent
    assert delete(state, version, {("t", 0): 2, ("t", 1): 0}) == {
        ("t", 0): (ErrorCode.NONE, 4),
        ("t", 1): (ErrorCode.NONE, 0),
    }
    assert delete(state, version, {("t", 0): -1}) == {("t", 0): (ErrorCode.NONE, 10)}
    assert state.get_log("t", 0).log_start_offset == 10


def test_delete_records_errors(state_factory):
    state = state_factory()
    create(state, "t", 1)
    create(state, "compacted", 1, **{"cleanup.policy": "compact"})
    create(state, "both", 1, **{"cleanup.policy": "compact,delete"})
    create(state, "__consumer_offsets", 1, **{"cleanup.policy": "compact"})
    fill(state, "t", 0, 3)
    fill(state, "both", 0, 3)
    answers = delete(
        state,
        2,
        {
            ("t", 0): 4,  # above the high watermark
            ("missing", 0): 1,
            ("compacted", 0): 0,
            ("both", 0): 2,
            ("__consumer_offsets", 0): 0,
        },
    )
    assert answers == {
        ("t", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("compacted", 0): (ErrorCode.POLICY_VIOLATION, -1),
        ("both", 0): (ErrorCode.NONE, 2),
        ("__consumer_offsets", 0): (ErrorCode.INVALID_TOPIC_EXCEPTION, -1),
    }
    assert delete(state, 2, {("t", 1): 0, ("t", 0): -2}) == {
        ("t", 1): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("t", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
    }
    assert state.get_log("t", 0).log_start_offset == 0


def test_delete_records_deletes_segments_wholly_below_the_start(state):
    create(state, "t", 1, **{"segment.bytes": 200})
    fill(state, "t", 0, 12)
    log = state.get_log("t", 0)
    before = [s.base_offset for s in log.segments]
    assert len(before) > 3
    target = before[2] + 1  # inside the third segment
    assert delete(state, 1, {("t", 0): target}) == {("t", 0): (ErrorCode.NONE, target)}
    assert [s.base_offset for s in log.segments] == before[2:]
    assert log.log_start_offset == target
