"""Produce, Fetch and ListOffsets handlers, called in-process through the wire codec."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.broker_helpers import (
    FETCH_VERSIONS,
    PRODUCE_VERSIONS,
    call,
    create,
    decode_all,
    fetch_request,
    list_offsets_request,
    make_batch,
    partition_results,
    produce_request,
)
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import CONTROL_MASK, patch_crc


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_then_fetch_every_version(state, version):
    create(state)

    async def scenario():
        first = await call(
            state,
            ApiKey.PRODUCE,
            version,
            produce_request("t", {0: make_batch([b"a", b"b"]), 2: make_batch([b"c"])}),
        )
        second = await call(
            state, ApiKey.PRODUCE, version, produce_request("t", {0: make_batch([b"d"])})
        )
        fetched = await call(
            state, ApiKey.FETCH, min(max(version, 4), 12), fetch_request("t", {0: 0, 1: 0, 2: 0})
        )
        return first, second, fetched

    first, second, fetched = asyncio.run(scenario())
    results = partition_results(first)
    assert results[("t", 0)].error_code == 0 and results[("t", 0)].base_offset == 0
    assert results[("t", 2)].error_code == 0 and results[("t", 2)].base_offset == 0
    assert partition_results(second)[("t", 0)].base_offset == 2
    if version >= 5:
        assert results[("t", 0)].log_start_offset == 0
    assert results[("t", 0)].log_append_time_ms == -1
    parts = {p.partition_index: p for p in fetched.responses[0].partitions}
    assert parts[0].high_watermark == 3 and parts[0].error_code == 0
    assert [v for _, _, v in decode_all(parts[0].records)] == [b"a", b"b", b"d"]
    assert [o for o, _, _ in decode_all(parts[0].records)] == [0, 1, 2]
    assert parts[1].high_watermark == 0 and len(parts[1].records or b"") == 0
    assert decode_all(parts[2].records) == [(0, b"k0", b"c")]


def test_produce_errors_leave_log_untouched(state_factory):
    state = state_factory(**{"message.max.bytes": 2000})
    create(state, "t", 6)
    corrupt = make_batch([b"x"])
    corrupt[-1] ^= 0xFF  # payload changed, CRC not
    control = make_batch([b"x"])
    control[22] |= CONTROL_MASK  # attributes low byte
    patch_crc(control)
    legacy = make_batch([b"x"])
    legacy[16] = 1  # magic 1
    too_big = make_batch([b"x" * 3000])
    two = make_batch([b"a"]) + make_batch([b"b"])
    request = produce_request(
        "t", {0: corrupt, 1: control, 2: legacy, 3: too_big, 4: two, 5: make_batch([b"ok"])}
    )

    async def scenario():
        return await call(state, ApiKey.PRODUCE, 9, request)

    results = partition_results(asyncio.run(scenario()))
    codes = {p: results[("t", p)].error_code for p in range(6)}
    assert codes == {
        0: ErrorCode.CORRUPT_MESSAGE,
        1: ErrorCode.INVALID_RECORD,
        2: ErrorCode.INVALID_RECORD,  # Kafka: v3+ only allows magic 2
        3: ErrorCode.MESSAGE_TOO_LARGE,
        4: ErrorCode.INVALID_RECORD,
        5: ErrorCode.NONE,
    }
    for p in range(5):
        assert state.get_log("t", p).log_end_offset == 0
        assert results[("t", p)].base_offset == -1
    assert state.get_log("t", 5).log_end_offset == 1


def test_produce_unknown_topic_and_bad_acks(state):
    create(state, "t", 1)

    async def scenario():
        unknown = await call(
            state, ApiKey.PRODUCE, 8, produce_request("nope", {0: make_batch([b"a"])})
        )
        bad_partition = await call(
            state, ApiKey.PRODUCE, 8, produce_request("t", {5: make_batch([b"a"])})
        )
        bad_acks = await call(
            state, ApiKey.PRODUCE, 8, produce_request("t", {0: make_batch([b"a"])}, acks=2)
        )
        return unknown, bad_partition, bad_acks

    unknown, bad_partition, bad_acks = asyncio.run(scenario())
    assert (
        partition_results(unknown)[("nope", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        partition_results(bad_partition)[("t", 5)].error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert partition_results(bad_acks)[("t", 0)].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert state.get_log("t", 0).log_end_offset == 0
    assert not state.logs.topic("nope")  # produce never auto-creates


def test_acks_zero_has_no_response_but_data_becomes_visible(state):
    create(state, "t", 1)

    async def scenario():
        response = await call(
            state, ApiKey.PRODUCE, 7, produce_request("t", {0: make_batch([b"a"])}, acks=0)
        )
        for _ in range(100):
            if state.get_log("t", 0).high_watermark == 1:
                break
            await asyncio.sleep(0.01)
        return response

    assert asyncio.run(scenario()) is None
    assert state.get_log("t", 0).high_watermark == 1


def test_acks_one_waits_for_fsync_and_hw(state):
    create(state, "t", 1)

    async def scenario():
        response = await call(
            state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"a"] * 5)}, acks=1)
        )
        return response, state.get_log("t", 0).high_watermark, state.get_log("t", 0).flushed_offset

    response, hw, flushed = asyncio.run(scenario())
    assert partition_results(response)[("t", 0)].error_code == 0
    assert hw == 5 and flushed == 5


def test_log_append_time_topic_reports_append_time(state):
    create(state, "t", 1, **{"message.timestamp.type": "LogAppendTime"})

    async def scenario():
        return await call(
            state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"a"], timestamp=1000)})
        )

    result = partition_results(asyncio.run(scenario()))[("t", 0)]
    assert result.error_code == 0 and result.log_append_time_ms > 1_600_000_000_000


def test_fetch_out_of_range_and_unknown(state):
    create(state, "t", 1)

    async def scenario():
        await call(state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"a"])}))
        high = await call(state, ApiKey.FETCH, 12, fetch_request("t", {0: 5}, max_wait_ms=5000))
        at_end = await call(state, ApiKey.FETCH, 12, fetch_request("t", {0: 1}, max_wait_ms=0))
        unknown = await call(state, ApiKey.FETCH, 12, fetch_request("zz", {0: 0}, max_wait_ms=5000))
        return high, at_end, unknown

    loop_start = asyncio.run
    high, at_end, unknown = loop_start(scenario())
    assert high.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert high.responses[0].partitions[0].high_watermark == -1
    part = at_end.responses[0].partitions[0]
    assert part.error_code == 0 and part.high_watermark == 1 and len(part.records or b"") == 0
    assert unknown.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_long_poll_wakes_on_produce(state):
    create(state, "t", 1)

    async def scenario():
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiting = asyncio.ensure_future(
            call(state, ApiKey.FETCH, 11, fetch_request("t", {0: 0}, max_wait_ms=10_000))
        )
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await call(state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"late"])}))
        fetched = await asyncio.wait_for(waiting, 5)
        return fetched, loop.time() - started

    fetched, elapsed = asyncio.run(scenario())
    assert elapsed < 5
    assert [v for _, _, v in decode_all(fetched.responses[0].partitions[0].records)] == [b"late"]


def test_fetch_long_poll_times_out_empty(state):
    create(state, "t", 1)

    async def scenario():
        loop = asyncio.get_running_loop()
        started = loop.time()
        fetched = await call(state, ApiKey.FETCH, 12, fetch_request("t", {0: 0}, max_wait_ms=200))
        return fetched, loop.time() - started

    fetched, elapsed = asyncio.run(scenario())
    assert 0.15 < elapsed < 3
    assert len(fetched.responses[0].partitions[0].records or b"") == 0


def test_fetch_max_bytes_returns_first_batch_whole(state):
    create(state, "t", 2)

    async def scenario():
        await call(
            state,
            ApiKey.PRODUCE,
            9,
            produce_request("t", {0: make_batch([b"x" * 2000]), 1: make_batch([b"y" * 2000])}),
        )
        await call(state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"z" * 2000])}))
        return await call(
            state,
            ApiKey.FETCH,
            12,
            fetch_request("t", {0: 0, 1: 0}, max_bytes=100, partition_max_bytes=100),
        )

    fetched = asyncio.run(scenario())
    parts = {p.partition_index: p for p in fetched.responses[0].partitions}
    # KIP-74: the first batch of the first non-empty partition comes back whole; nothing more
    assert [o for o, _, _ in decode_all(parts[0].records)] == [0]
    assert len(parts[1].records or b"") == 0


def test_fetch_incremental_session_not_found(state):
    create(state, "t", 1)

    async def scenario():
        incremental = await call(
            state, ApiKey.FETCH, 12, fetch_request("t", {0: 0}, session_id=7, session_epoch=3)
        )
        full = await call(state, ApiKey.FETCH, 12, fetch_request("t", {0: 0}, session_epoch=0))
        return incremental, full

    incremental, full = asyncio.run(scenario())
    assert incremental.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert full.error_code == 0 and full.session_id == 0


@pytest.mark.parametrize("version", range(1, 11))
def test_list_offsets(state, version):
    create(state, "t", 4)

    async def scenario():
        await call(
            state,
            ApiKey.PRODUCE,
            9,
            produce_request("t", {p: make_batch([b"a", b"b"], timestamp=1000) for p in range(4)}),
        )
        await call(
            state,
            ApiKey.PRODUCE,
            9,
            produce_request("t", {p: make_batch([b"c"], timestamp=5000) for p in range(4)}),
        )
        timestamps = {0: -2, 1: -1, 2: 3000}
        if version >= 7:
            timestamps[3] = -3
        return await call(
            state, ApiKey.LIST_OFFSETS, version, list_offsets_request("t", timestamps)
        )

    response = asyncio.run(scenario())
    parts = {p.partition_index: p for p in response.topics[0].partitions}
    assert parts[0].offset == 0
    assert parts[1].offset == 3
    assert (parts[2].offset, parts[2].timestamp) == (2, 5000)
    if version >= 7:
        assert (parts[3].offset, parts[3].timestamp) == (2, 5000)
    assert all(p.error_code == 0 for p in parts.values())


def test_list_offsets_earliest_local_and_latest_tiered_without_remote_storage(state):
    """v8's -4 and v9's -5 (KIP-405, KIP-1005) as a Kafka broker without tiered storage answers
    them: the log start offset, and offset -1 with leader epoch -1; v11's -6 is not served."""
    create(state, "t", 3)

    async def scenario():
        await call(state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"a", b"b"])}))
        request = list_offsets_request("t", {0: -4, 1: -5, 2: -6})
        return await call(state, ApiKey.LIST_OFFSETS, 10, request)

    response = asyncio.run(scenario())
    parts = {
        p.partition_index: (ErrorCode(p.error_code), p.offset, p.timestamp, p.leader_epoch)
        for p in response.topics[0].partitions
    }
    assert parts == {
        0: (ErrorCode.NONE, 0, -1, 0),
        1: (ErrorCode.NONE, -1, -1, -1),
        2: (ErrorCode.INVALID_REQUEST, -1, -1, -1),
    }


def test_list_offsets_unknown_partition_and_future_timestamp(state):
    create(state, "t", 1)

    async def scenario():
        await call(
            state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"a"], timestamp=1000)})
        )
        future = await call(state, ApiKey.LIST_OFFSETS, 5, list_offsets_request("t", {0: 10**13}))
        unknown = await call(state, ApiKey.LIST_OFFSETS, 5, list_offsets_request("t", {3: -1}))
        return future, unknown

    future, unknown = asyncio.run(scenario())
    assert future.topics[0].partitions[0].offset == -1
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_framing_errors_follow_kafkas_order(state):
    from onceflow.records.compression import CompressionType

    create(state, "t", 4)
    zstd = make_batch([b"z"], compression=CompressionType.ZSTD)
    truncated = make_batch([b"x" * 100])[:-10]
    cases = {0: zstd, 1: truncated, 2: b"", 3: make_batch([b"ok"]) + b"\x00\x01"}

    async def scenario():
        old = await call(state, ApiKey.PRODUCE, 6, produce_request("t", cases))
        new = await call(state, ApiKey.PRODUCE, 7, produce_request("t", {0: zstd}))
        return old, new

    old, new = asyncio.run(scenario())
    codes = {p: r.error_code for (_, p), r in partition_results(old).items()}
    assert codes == {
        0: ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        1: ErrorCode.INVALID_RECORD,
        2: ErrorCode.INVALID_RECORD,
        3: ErrorCode.CORRUPT_MESSAGE,
    }
    assert partition_results(new)[("t", 0)].error_code == ErrorCode.NONE
    assert [state.get_log("t", p).log_end_offset for p in range(4)] == [1, 0, 0, 0]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_every_version(state, version):
    create(state, "t", 2)
    topic_id = state.logs.topic("t").topic_id
    by_id = version >= 13

    def request(topic="t", tid=topic_id, offsets=None):
        return fetch_request(
            topic if not by_id else None, offsets or {0: 0, 1: 0}, topic_id=tid if by_id else None
        )

    async def scenario():
        await call(state, ApiKey.PRODUCE, 9, produce_request("t", {0: make_batch([b"a", b"b"])}))
        fetched = await call(state, ApiKey.FETCH, version, request())
        unknown = await call(state, ApiKey.FETCH, version, request("zz", uuid.uuid4(), {0: 0}))
        return fetched, unknown

    fetched, unknown = asyncio.run(scenario())
    [topic] = fetched.responses
    if by_id:
        assert topic.topic_id == topic_id
    else:
        assert topic.topic == "t"
    parts = {p.partition_index: p for p in topic.partitions}
    assert [v for _, _, v in decode_all(parts[0].records)] == [b"a", b"b"]
    assert parts[0].high_watermark == 2 and parts[1].high_watermark == 0
    if version >= 5:
        assert parts[0].log_start_offset == 0
    expected = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert unknown.responses[0].partitions[0].error_code == expected
