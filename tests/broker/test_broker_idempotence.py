"""Idempotent producers on the broker, in-process: InitProducerId, Produce with producer ids
(duplicates, gaps, stale epochs), read_committed Fetch and ListOffsets over an open or aborted
transaction, LSO wake-ups of long polls, DescribeProducers, and producer-id expiry."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.broker_helpers import (
    call,
    create,
    decode_all,
    fetch_request,
    make_batch,
    produce_partitions,
)
from onceflow.log.producer_state import AppendOrigin
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_producers import DescribeProducersRequest
from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest
from onceflow.protocol.messages.list_offsets import ListOffsetsRequest
from onceflow.records.control import ControlRecordType, build_control_batch

INIT_VERSIONS = range(0, 6)
PRODUCE_VERSIONS = range(3, 13)


def init_request(version: int, transactional_id=None, producer_id=-1, producer_epoch=-1):
    request = InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60000)
    if version >= 3:
        request.producer_id = producer_id
        request.producer_epoch = producer_epoch
    return request


def idempotent_batch(pid: int, epoch: int, seq: int, values, *, transactional=False):
    return make_batch(
        values,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=transactional,
    )


def produce(state, version, partitions, topic="t"):
    return produce_partitions(state, topic, partitions, version)


# -- InitProducerId ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", INIT_VERSIONS)
def test_init_producer_id_hands_out_new_ids_with_epoch_0(state, version):
    async def scenario():
        first = await call(state, ApiKey.INIT_PRODUCER_ID, version, init_request(version))
        # v3+: an idempotent producer naming its current id still gets a fresh one (KIP-360)
        again = await call(
            state,
            ApiKey.INIT_PRODUCER_ID,
            version,
            init_request(version, producer_id=first.producer_id, producer_epoch=0),
        )
        return first, again

    first, again = asyncio.run(scenario())
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    assert (again.error_code, again.producer_epoch) == (ErrorCode.NONE, 0)
    assert first.producer_id >= 0 and again.producer_id > first.producer_id
    assert state.producer_ids.allocated == 2


def test_producer_ids_are_never_reused_across_restarts(state_factory):
    state = state_factory("d")
    ids = [
        asyncio.run(call(state, ApiKey.INIT_PRODUCER_ID, 4, init_request(4))).producer_id
        for _ in range(3)
    ]
    asyncio.run(state.close())
    reopened = state_factory("d")
    later = asyncio.run(call(reopened, ApiKey.INIT_PRODUCER_ID, 4, init_request(4))).producer_id
    assert ids == sorted(set(ids)) and later > max(ids)


@pytest.mark.parametrize("version", INIT_VERSIONS)
def test_init_producer_id_empty_transactional_id_is_invalid(state, version):
    """(Non-empty transactional ids go to the transaction coordinator: tested with it.)"""
    empty = asyncio.run(call(state, ApiKey.INIT_PRODUCER_ID, version, init_request(version, "")))
    assert empty.error_code == ErrorCode.INVALID_REQUEST
    assert empty.producer_id == -1


def test_init_producer_id_io_failure_is_retriable(state, monkeypatch):
    def fail():
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(state.producer_ids, "generate_producer_id", fail)
    response = asyncio.run(call(state, ApiKey.INIT_PRODUCER_ID, 4, init_request(4)))
    assert response.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert response.producer_id == -1


# -- Produce with producer ids ------------------------------------------------------------------


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_retried_batch_is_answered_with_its_original_offset(state, version):
    create(state, "t", 1)
    produce(state, version, {0: make_batch([b"plain"])})  # offset 0, no producer id
    batch = idempotent_batch(7, 0, 0, [b"a", b"b"])
    first = produce(state, version, {0: bytearray(batch)})[("t", 0)]
    retry = produce(state, version, {0: bytearray(batch)})[("t", 0)]
    nxt = produce(state, version, {0: idempotent_batch(7, 0, 2, [b"c"])})[("t", 0)]
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 1)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 1)
    assert (nxt.error_code, nxt.base_offset) == (ErrorCode.NONE, 3)
    partition_log = state.get_log("t", 0)
    assert partition_log.log_end_offset == 4
    records = partition_log.read(0, 10**6).records
    assert [v for _, _, v in decode_all(records)] == [b"plain", b"a", b"b", b"c"]
    assert state.metrics.duplicate_batches == 1


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_sequence_gap_and_stale_epoch_are_rejected_with_a_message(state, version):
    create(state, "t", 1)
    assert produce(state, version, {0: idempotent_batch(9, 1, 0, [b"a"])})[("t", 0)].error_code == 0
    gap = produce(state, version, {0: idempotent_batch(9, 1, 5, [b"x"])})[("t", 0)]
    stale = produce(state, version, {0: idempotent_batch(9, 0, 1, [b"y"])})[("t", 0)]
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and gap.base_offset == -1
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    if version >= 8:
        assert "OUT_OF_ORDER_SEQUENCE_NUMBER" in gap.error_message
        assert "producer 9" in gap.error_message
    assert state.get_log("t", 0).log_end_offset == 1
    assert state.metrics.produce_errors[ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER] == 1
    assert state.metrics.produce_errors[ErrorCode.INVALID_PRODUCER_EPOCH] == 1
    # the next in-sequence batch is still accepted
    assert (
        produce(state, version, {0: idempotent_batch(9, 1, 1, [b"b"])})[("t", 0)].base_offset == 1
    )


def test_unknown_producer_with_nonzero_sequence_is_accepted(state):
    """KIP-360: no state for the producer (e.g. expired) -> any sequence is accepted."""
    create(state, "t", 1)
    result = produce(state, 9, {0: idempotent_batch(11, 0, 42, [b"a"])})[("t", 0)]
    assert result.error_code == ErrorCode.NONE


def test_duplicate_of_a_batch_in_the_same_request_is_not_written_twice(state):
    """A retry and new data for another partition in one request: each handled on its own."""
    create(state, "t", 2)
    batch = idempotent_batch(3, 0, 0, [b"a"])
    produce(state, 9, {0: bytearray(batch)})
    results = produce(state, 9, {0: bytearray(batch), 1: idempotent_batch(3, 0, 0, [b"z"])})
    assert results[("t", 0)].base_offset == 0 and results[("t", 1)].base_offset == 0
    assert state.get_log("t", 0).log_end_offset == 1
    assert state.get_log("t", 1).log_end_offset == 1


# -- read_committed -----------------------------------------------------------------------------


def marker(pid: int, epoch: int, kind: ControlRecordType):
    return build_control_batch(pid, epoch, kind, 0, int(time.time() * 1000))


def committed_fetch(topic, offset, **kwargs):
    request = fetch_request(topic, {0: offset}, **kwargs)
    request.isolation_level = 1
    return request


def list_latest(state, read_committed: bool):
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=1 if read_committed else 0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="t",
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    )
                ],
            )
        ],
    )
    response = asyncio.run(call(state, ApiKey.LIST_OFFSETS, 7, request))
    return response.topics[0].partitions[0].offset


async def _append_marker(state, partition_log, batch) -> None:
    result = partition_log.append(batch, origin=AppendOrigin.COORDINATOR)
    assert result.error == ErrorCode.NONE
    assert await state.committer.flushed(partition_log, result.next_offset) == ErrorCode.NONE


@pytest.mark.parametrize("version", [4, 11, 12])
def test_read_committed_stops_at_lso_and_lists_aborted_transactions(state, version):
    create(state, "t", 1)
    partition_log = state.get_log("t", 0)
    txn = produce(state, 9, {0: idempotent_batch(5, 0, 0, [b"t1", b"t2"], transactional=True)})
    produce(state, 9, {0: make_batch([b"plain"])})
    assert txn[("t", 0)].base_offset == 0
    assert partition_log.high_watermark == 3 and partition_log.last_stable_offset == 0
    assert list_latest(state, read_committed=True) == 0
    assert list_latest(state, read_committed=False) == 3

    pending = asyncio.run(call(state, ApiKey.FETCH, version, committed_fetch("t", 0)))
    part = pending.responses[0].partitions[0]
    assert (part.high_watermark, part.last_stable_offset) == (3, 0)
    assert len(part.records or b"") == 0 and part.aborted_transactions == []
    uncommitted = asyncio.run(call(state, ApiKey.FETCH, version, fetch_request("t", {0: 0})))
    assert uncommitted.responses[0].partitions[0].aborted_transactions is None
    assert uncommitted.responses[0].partitions[0].last_stable_offset == 0

    asyncio.run(_append_marker(state, partition_log, marker(5, 0, ControlRecordType.ABORT)))
    assert partition_log.last_stable_offset == 4
    assert list_latest(state, read_committed=True) == 4
    done = asyncio.run(call(state, ApiKey.FETCH, version, committed_fetch("t", 0)))
    part = done.responses[0].partitions[0]
    assert part.last_stable_offset == 4
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(5, 0)]
    assert [o for o, _, _ in decode_all(part.records)] == [0, 1, 2, 3]
    # a fetch starting after the aborted transaction does not list it
    later = asyncio.run(call(state, ApiKey.FETCH, version, committed_fetch("t", 4)))
    assert later.responses[0].partitions[0].aborted_transactions == []


def test_committed_transaction_is_not_listed_as_aborted(state):
    create(state, "t", 1)
    partition_log = state.get_log("t", 0)
    produce(state, 9, {0: idempotent_batch(6, 0, 0, [b"c"], transactional=True)})
    asyncio.run(_append_marker(state, partition_log, marker(6, 0, ControlRecordType.COMMIT)))
    part = asyncio.run(call(state, ApiKey.FETCH, 12, committed_fetch("t", 0)))
    part = part.responses[0].partitions[0]
    assert part.aborted_transactions == [] and part.last_stable_offset == 2
    assert [v for _, _, v in decode_all(part.records)][0] == b"c"


def test_long_poll_wakes_when_the_lso_moves(state):
    """An open transaction pins the LSO below data that is already durable; a read_committed
    fetch waits. The marker moves the LSO before any fsync round: the fetch must answer then,
    not at max_wait_ms (the marker is deliberately never flushed here)."""
    create(state, "t", 1)
    partition_log = state.get_log("t", 0)
    produce(state, 9, {0: idempotent_batch(8, 0, 0, [b"txn"], transactional=True)})
    produce(state, 9, {0: make_batch([b"after"])})
    assert (partition_log.last_stable_offset, partition_log.high_watermark) == (0, 2)

    async def scenario():
        fetch = asyncio.ensure_future(
            call(state, ApiKey.FETCH, 12, committed_fetch("t", 0, max_wait_ms=10_000))
        )
        await asyncio.sleep(0.3)
        assert not fetch.done()
        started = time.monotonic()
        result = partition_log.append(
            marker(8, 0, ControlRecordType.COMMIT), origin=AppendOrigin.COORDINATOR
        )
        assert result.error == ErrorCode.NONE  # nothing else: the log's event wakes the fetch
        response = await asyncio.wait_for(fetch, 15)
        return response, time.monotonic() - started

    response, waited = asyncio.run(scenario())
    part = response.responses[0].partitions[0]
    assert waited < 2.0, f"the fetch waited {waited:.1f}s: not woken by the LSO move"
    assert [v for _, _, v in decode_all(part.records)] == [b"txn", b"after"]
    assert part.last_stable_offset == 2


# -- DescribeProducers and expiry ---------------------------------------------------------------


def describe(state, partitions):
    request = DescribeProducersRequest(
        topics=[DescribeProducersRequest.TopicRequest(name="t", partition_indexes=partitions)]
    )
    response = asyncio.run(call(state, ApiKey.DESCRIBE_PRODUCERS, 0, request))
    return {p.partition_index: p for p in response.topics[0].partitions}


def test_describe_producers(state):
    create(state, "t", 2)
    produce(state, 9, {0: idempotent_batch(21, 2, 0, [b"a", b"b", b"c"])})
    produce(state, 9, {0: idempotent_batch(20, 0, 0, [b"t"], transactional=True)})
    parts = describe(state, [0, 1, 7])
    assert parts[7].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert parts[1].error_code == ErrorCode.NONE and parts[1].active_producers == []
    rows = [
        (p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
        for p in parts[0].active_producers
    ]
    assert rows == [(20, 0, 0, 3), (21, 2, 2, -1)]
    assert all(p.last_timestamp > 0 for p in parts[0].active_producers)


def test_expire_producers_drops_idle_ids(state_factory):
    state = state_factory(**{"producer.id.expiration.ms": 1000})
    create(state, "t", 1)
    old = int(time.time() * 1000) - 60_000
    batch = make_batch([b"a"], timestamp=old, producer_id=30, producer_epoch=0, base_sequence=0)
    produce(state, 9, {0: batch})
    produce(state, 9, {0: idempotent_batch(31, 0, 0, [b"fresh"])})
    assert state.get_log("t", 0).live_producer_count == 2
    assert state.expire_producers() == 1
    assert [p.producer_id for p in describe(state, [0])[0].active_producers] == [31]
    assert state.metrics.expired_producer_ids == 1
