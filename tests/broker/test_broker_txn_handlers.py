"""Transactions on the broker, in-process through the wire encoding: FindCoordinator,
InitProducerId with a transactional id, AddPartitionsToTxn (v0-5, verify-only), AddOffsetsToTxn,
EndTxn, KIP-890 Produce verification, fencing, DescribeTransactions, ListTransactions,
WriteTxnMarkers (refused, and the loopback admin abort) and the transactional-id gauge."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from broker.broker_helpers import (
    call,
    create,
    decode_all,
    fetch_request,
    make_batch,
    offset_commit_request,
    partition_results,
    produce_request,
    samples,
)
from onceflow.broker.context import RequestContext
from onceflow.broker.dispatch import lookup
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import RequestHeader
from onceflow.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from onceflow.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest
from onceflow.protocol.messages.end_txn import EndTxnRequest
from onceflow.protocol.messages.find_coordinator import FindCoordinatorRequest
from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest
from onceflow.protocol.messages.list_transactions import ListTransactionsRequest
from onceflow.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from onceflow.records.batch import iter_batches
from onceflow.records.record import decode_records

TXN_PROPS = {"transaction.state.log.num.partitions": 3}
_Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic


def run(state, scenario):
    """Run `scenario()` on one loop, then let every marker task finish on it."""

    async def main():
        try:
            return await scenario()
        finally:
            await state.transactions.coordinator.wait_for_completions()

    return asyncio.run(main())


@pytest.fixture
def txn_state(state_factory):
    state = state_factory(**TXN_PROPS)
    create(state, "t", 3)
    return state


async def find_txn(state, tid, version=3):
    request = FindCoordinatorRequest(key=tid, key_type=1)
    return await call(state, ApiKey.FIND_COORDINATOR, version, request)


async def init(state, tid, version=4, timeout_ms=60000, pid=-1, epoch=-1):
    request = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms)
    if version >= 3:
        request.producer_id, request.producer_epoch = pid, epoch
    response = await call(state, ApiKey.INIT_PRODUCER_ID, version, request)
    return response.error_code, response.producer_id, response.producer_epoch


async def add_partitions(state, tid, pid, epoch, parts, version=3, topic="t"):
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[_Topic(name=topic, partitions=list(parts))],
    )
    response = await call(state, ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def end_txn(state, tid, pid, epoch, commit, version=3):
    request = EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    )
    return await call(state, ApiKey.END_TXN, version, request)


async def txn_produce(state, tid, pid, epoch, seq, partition, values, version=9, topic="t"):
    batch = make_batch(
        values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    request = produce_request(topic, {partition: batch})
    request.transactional_id = tid
    response = await call(state, ApiKey.PRODUCE, version, request)
    return partition_results(response)[(topic, partition)]


async def begin(state, tid, parts=(0,)):
    """FindCoordinator, InitProducerId and AddPartitionsToTxn: an ONGOING transaction."""
    assert (await find_txn(state, tid)).error_code == ErrorCode.NONE
    error, pid, epoch = await init(state, tid)
    assert error == ErrorCode.NONE
    assert set((await add_partitions(state, tid, pid, epoch, parts)).values()) == {ErrorCode.NONE}
    return pid, epoch


def visible(data, aborted) -> list[bytes]:
    """Values a read_committed client keeps: no control batches, no aborted producer's batches
    at or after its aborted transaction's first offset (one transaction per producer here)."""
    first_aborted = dict(aborted)
    out = []
    for header, view in iter_batches(data.records or b""):
        if header.is_control:
            continue
        start = first_aborted.get(header.producer_id)
        if start is not None and header.base_offset >= start:
            continue
        out.extend(record.value for record in decode_records(view))
    return out


async def read_committed(state, partition):
    request = fetch_request("t", {partition: 0})
    request.isolation_level = 1
    response = await call(state, ApiKey.FETCH, 12, request)
    data = response.responses[0].partitions[0]
    aborted = {(a.producer_id, a.first_offset) for a in data.aborted_transactions or []}
    return data, aborted


# -- FindCoordinator ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 6))
def test_find_coordinator_answers_this_node_for_groups_and_transactions(txn_state, version):
    state = txn_state

    async def scenario():
        state.load_coordinators()
        key_types = [0] if version == 0 else [0, 1]
        out = []
        for key_type in key_types:
            if version >= 4:
                request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=["a", "b"])
            else:
                request = FindCoordinatorRequest(key="a", key_type=key_type)
            out.append(await call(state, ApiKey.FIND_COORDINATOR, version, request))
        return out

    address = state.advertised
    for response in run(state, scenario):
        entries = response.coordinators if version >= 4 else [response]
        assert len(entries) == (2 if version >= 4 else 1)
        for entry in entries:
            assert entry.error_code == ErrorCode.NONE
            assert (entry.node_id, entry.host, entry.port) == (
                state.node_id,
                address.host,
                address.port,
            )
    if version > 0:
        assert state.logs.topic("__transaction_state").partitions == 3


def test_find_coordinator_unknown_key_type_is_invalid_request(txn_state):
    async def scenario():
        return await call(
            txn_state,
            ApiKey.FIND_COORDINATOR,
            4,
            FindCoordinatorRequest(key_type=7, coordinator_keys=["x"]),
        )

    (entry,) = run(txn_state, scenario).coordinators
    assert (entry.error_code, entry.node_id, entry.port) == (ErrorCode.INVALID_REQUEST, -1, -1)


def test_transaction_state_topic_is_created_lazily(txn_state):
    assert txn_state.logs.topic("__transaction_state") is None

    async def scenario():
        # before any lookup, coordinator APIs send the client to FindCoordinator
        before = await end_txn(txn_state, "x", 1, 0, True)
        found = await find_txn(txn_state, "x")
        return before, found

    before, found = run(txn_state, scenario)
    assert before.error_code == ErrorCode.NOT_COORDINATOR
    assert found.error_code == ErrorCode.NONE
    assert txn_state.logs.topic("__transaction_state") is not None


# -- InitProducerId ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 6))
def test_init_producer_id_bumps_the_epoch_per_transactional_id(txn_state, version):
    async def scenario():
        await find_txn(txn_state, "tx")
        first = await init(txn_state, "tx", version)
        second = await init(txn_state, "tx", version)
        other = await init(txn_state, "other", version)
        too_long = await init(txn_state, "tx", version, timeout_ms=10**9)
        empty = await init(txn_state, "", version)
        return first, second, other, too_long, empty

    first, second, other, too_long, empty = run(txn_state, scenario)
    assert first[0] == second[0] == other[0] == ErrorCode.NONE
    assert second[1] == first[1] and second[2] == first[2] + 1
    assert other[1] != first[1]
    assert too_long[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert empty[0] == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    ("version", "expected"), [(3, "INVALID_PRODUCER_EPOCH"), (4, "PRODUCER_FENCED")]
)
def test_init_producer_id_with_wrong_expected_producer_is_fenced(txn_state, version, expected):
    async def scenario():
        await find_txn(txn_state, "tx")
        _, pid, epoch = await init(txn_state, "tx", version)
        return await init(txn_state, "tx", version, pid=pid + 1000, epoch=epoch)

    assert run(txn_state, scenario)[0] == ErrorCode[expected]


def test_init_producer_id_fences_and_aborts_an_ongoing_transaction(txn_state):
    async def scenario():
        pid, epoch = await begin(txn_state, "tx")
        written = await txn_produce(txn_state, "tx", pid, epoch, 0, 0, [b"doomed"])
        retried = await init(txn_state, "tx")  # ONGOING: fence + abort, retry later
        await txn_state.transactions.coordinator.wait_for_completions()
        again = await init(txn_state, "tx")
        data, aborted = await read_committed(txn_state, 0)
        return written, retried, again, data, aborted, pid

    written, retried, again, data, aborted, pid = run(txn_state, scenario)
    assert written.error_code == ErrorCode.NONE
    assert retried[0] == ErrorCode.CONCURRENT_TRANSACTIONS
    assert again[0] == ErrorCode.NONE and again[2] == 2  # epoch 0, fence 1, new producer 2
    assert aborted == {(pid, 0)}
    assert data.last_stable_offset == 2  # the record and the ABORT marker


# -- a whole transaction -----------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 4))
def test_commit_makes_records_visible_to_read_committed(txn_state, version):
    state = txn_state

    async def scenario():
        await find_txn(state, "tx")
        _, pid, epoch = await init(state, "tx")
        added = await add_partitions(state, "tx", pid, epoch, [0, 1], version)
        p0 = await txn_produce(state, "tx", pid, epoch, 0, 0, [b"a", b"b"])
        p1 = await txn_produce(state, "tx", pid, epoch, 0, 1, [b"c"])
        open_data, _ = await read_committed(state, 0)
        ended = await end_txn(state, "tx", pid, epoch, True, version)
        await state.transactions.coordinator.wait_for_completions()
        retry = await end_txn(state, "tx", pid, epoch, True, version)
        wrong = await end_txn(state, "tx", pid, epoch, False, version)
        done_data, aborted = await read_committed(state, 0)
        return added, p0, p1, open_data, ended, retry, wrong, done_data, aborted

    added, p0, p1, open_data, ended, retry, wrong, done_data, aborted = run(state, scenario)
    assert set(added.values()) == {ErrorCode.NONE}
    assert p0.error_code == p1.error_code == ErrorCode.NONE
    assert open_data.last_stable_offset == 0 and open_data.high_watermark == 2
    assert decode_all(open_data.records or b"") == []
    assert ended.error_code == ErrorCode.NONE
    assert retry.error_code == ErrorCode.NONE  # idempotent retry after completion
    assert wrong.error_code == ErrorCode.INVALID_TXN_STATE
    assert done_data.last_stable_offset == 3 and aborted == set()  # 2 records + COMMIT marker
    assert visible(done_data, aborted) == [b"a", b"b"]
    for partition in (0, 1):
        assert state.get_log("t", partition).last_stable_offset == (3 if partition == 0 else 2)


def test_end_txn_v5_returns_the_producer_and_stale_epochs_are_fenced(txn_state):
    async def scenario():
        pid, epoch = await begin(txn_state, "tx")
        stale_v1 = await end_txn(txn_state, "tx", pid, epoch - 1, True, 1)
        stale_v2 = await end_txn(txn_state, "tx", pid, epoch - 1, True, 2)
        mapping = await end_txn(txn_state, "tx", pid + 7, epoch, True, 5)
        ok = await end_txn(txn_state, "tx", pid, epoch, False, 5)
        return pid, epoch, stale_v1, stale_v2, mapping, ok

    pid, epoch, stale_v1, stale_v2, mapping, ok = run(txn_state, scenario)
    assert stale_v1.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert stale_v2.error_code == ErrorCode.PRODUCER_FENCED
    assert mapping.error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert (mapping.producer_id, mapping.producer_epoch) == (-1, -1)
    assert (ok.error_code, ok.producer_id, ok.producer_epoch) == (ErrorCode.NONE, pid, epoch)


def test_add_partitions_unknown_partition_adds_nothing(txn_state):
    async def scenario():
        await find_txn(txn_state, "tx")
        _, pid, epoch = await init(txn_state, "tx")
        errors = await add_partitions(txn_state, "tx", pid, epoch, [0, 9])
        desc = await call(
            txn_state,
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            DescribeTransactionsRequest(transactional_ids=["tx"]),
        )
        return errors, desc

    errors, desc = run(txn_state, scenario)
    assert errors == {
        ("t", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert desc.transaction_states[0].transaction_state == "Empty"


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_batched_and_verify_only(txn_state, version):
    _Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction

    async def scenario():
        await find_txn(txn_state, "a")
        _, pid_a, epoch_a = await init(txn_state, "a")
        _, pid_b, epoch_b = await init(txn_state, "b")
        request = AddPartitionsToTxnRequest(
            transactions=[
                _Txn(
                    transactional_id="a",
                    producer_id=pid_a,
                    producer_epoch=epoch_a,
                    verify_only=False,
                    topics=[_Topic(name="t", partitions=[0])],
                ),
                _Txn(
                    transactional_id="b",
                    producer_id=pid_b,
                    producer_epoch=epoch_b,
                    verify_only=True,
                    topics=[_Topic(name="t", partitions=[1])],
                ),
            ]
        )
        first = await call(txn_state, ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
        for entry in request.transactions:
            entry.verify_only = True
        request.transactions[1].topics[0].partitions = [1]
        request.transactions[0].topics[0].partitions = [0, 2]
        second = await call(txn_state, ApiKey.ADD_PARTITIONS_TO_TXN, version, request)
        return first, second

    def codes(response):
        assert response.error_code == ErrorCode.NONE
        return {
            (r.transactional_id, p.partition_index): p.partition_error_code
            for r in response.results_by_transaction
            for t in r.topic_results
            for p in t.results_by_partition
        }

    first, second = run(txn_state, scenario)
    assert codes(first) == {("a", 0): ErrorCode.NONE, ("b", 1): ErrorCode.INVALID_TXN_STATE}
    assert codes(second) == {
        ("a", 0): ErrorCode.NONE,
        ("a", 2): ErrorCode.INVALID_TXN_STATE,
        ("b", 1): ErrorCode.INVALID_TXN_STATE,
    }


# -- KIP-890 Produce verification and fencing --------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [(3, "INVALID_TXN_STATE"), (10, "INVALID_TXN_STATE"), (11, "TRANSACTION_ABORTABLE"),
     (12, "TRANSACTION_ABORTABLE")],
)  # fmt: skip
def test_produce_to_a_partition_not_in_the_transaction_is_rejected(txn_state, version, expected):
    async def scenario():
        pid, epoch = await begin(txn_state, "tx", parts=[0])
        stray = await txn_produce(txn_state, "tx", pid, epoch, 0, 1, [b"x"], version)
        return stray

    stray = run(txn_state, scenario)
    assert stray.error_code == ErrorCode[expected]
    assert txn_state.get_log("t", 1).log_end_offset == 0  # nothing written, no hanging txn


def test_late_write_after_commit_cannot_open_a_hanging_transaction(txn_state):
    async def scenario():
        pid, epoch = await begin(txn_state, "tx")
        await txn_produce(txn_state, "tx", pid, epoch, 0, 0, [b"a"])
        await end_txn(txn_state, "tx", pid, epoch, True)
        in_flight = await txn_produce(txn_state, "tx", pid, epoch, 1, 0, [b"during"])
        await txn_state.transactions.coordinator.wait_for_completions()
        late = await txn_produce(txn_state, "tx", pid, epoch, 1, 0, [b"late"])
        return in_flight, late

    in_flight, late = run(txn_state, scenario)
    assert in_flight.error_code == ErrorCode.NOT_ENOUGH_REPLICAS  # markers in flight: retriable
    assert late.error_code == ErrorCode.INVALID_TXN_STATE
    log = txn_state.get_log("t", 0)
    assert log.log_end_offset == 2  # the record and the COMMIT marker only
    assert log.last_stable_offset == 2


def test_fenced_producer_cannot_write_add_or_commit(txn_state):
    async def scenario():
        pid, old = await begin(txn_state, "tx")
        before = await txn_produce(txn_state, "tx", pid, old, 0, 0, [b"zombie-1"])
        # a second producer with the same id: the ongoing transaction is fenced and aborted
        assert (await init(txn_state, "tx"))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        await txn_state.transactions.coordinator.wait_for_completions()
        error, pid2, new = await init(txn_state, "tx")
        assert error == ErrorCode.NONE and pid2 == pid and new > old
        send = await txn_produce(txn_state, "tx", pid, old, 1, 0, [b"zombie-2"])
        add_v1 = await add_partitions(txn_state, "tx", pid, old, [1], version=1)
        add_v3 = await add_partitions(txn_state, "tx", pid, old, [1], version=3)
        offsets = await call(
            txn_state,
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            AddOffsetsToTxnRequest(
                transactional_id="tx", producer_id=pid, producer_epoch=old, group_id="g"
            ),
        )
        commit = await end_txn(txn_state, "tx", pid, old, True)
        data, aborted = await read_committed(txn_state, 0)
        return before, send, add_v1, add_v3, offsets, commit, data, aborted, pid

    before, send, add_v1, add_v3, offsets, commit, data, aborted, pid = run(txn_state, scenario)
    assert before.error_code == ErrorCode.NONE
    assert send.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert add_v1 == {("t", 1): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert add_v3 == {("t", 1): ErrorCode.PRODUCER_FENCED}
    assert offsets.error_code == ErrorCode.PRODUCER_FENCED
    assert commit.error_code == ErrorCode.PRODUCER_FENCED
    assert visible(data, aborted) == [] and aborted == {(pid, 0)}
    assert txn_state.get_log("t", 0).log_end_offset == 2  # zombie-1 + ABORT marker


@pytest.mark.parametrize("verification", [True, False])
@pytest.mark.parametrize("version", range(3, 13))
def test_stale_epoch_on_produce_is_invalid_producer_epoch_at_every_version(
    state_factory, version, verification
):
    # Kafka answers a stale epoch on Produce with INVALID_PRODUCER_EPOCH at every version: the
    # log's ProducerAppendInfo throws InvalidProducerEpochException, and AddPartitionsToTxnManager
    # turns the coordinator's PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for the verification
    # path. librdkafka reports _FENCED to its application on receiving it (rdkafka_request.c).
    state = state_factory(
        **TXN_PROPS, **{"transaction.partition.verification.enable": verification}
    )
    create(state, "t", 3)

    async def scenario():
        pid, old = await begin(state, "tx")
        first = await txn_produce(state, "tx", pid, old, 0, 0, [b"zombie-1"], version=version)
        assert (await init(state, "tx"))[0] == ErrorCode.CONCURRENT_TRANSACTIONS
        await state.transactions.coordinator.wait_for_completions()
        error, _, new = await init(state, "tx")
        assert error == ErrorCode.NONE and new > old
        stale = await txn_produce(state, "tx", pid, old, 1, 0, [b"zombie-2"], version=version)
        return first, stale

    first, stale = run(state, scenario)
    assert first.error_code == ErrorCode.NONE
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.get_log("t", 0).log_end_offset == 2  # zombie-1 and the ABORT marker


def test_transactional_id_must_map_to_the_batch_producer(txn_state):
    async def scenario():
        pid, epoch = await begin(txn_state, "tx")
        await begin(txn_state, "other")
        return await txn_produce(txn_state, "other", pid, epoch, 0, 0, [b"x"])

    assert run(txn_state, scenario).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_verification_can_be_disabled(state_factory):
    state = state_factory(**TXN_PROPS, **{"transaction.partition.verification.enable": False})
    create(state, "t", 3)

    async def scenario():
        pid, epoch = await begin(state, "tx", parts=[0])
        return await txn_produce(state, "tx", pid, epoch, 0, 1, [b"x"])

    assert run(state, scenario).error_code == ErrorCode.NONE


# -- AddOffsetsToTxn ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(0, 5))
def test_add_offsets_adds_the_group_partition(txn_state, version):
    async def scenario():
        txn_state.load_coordinators()
        pid, epoch = await begin(txn_state, "tx")
        response = await call(
            txn_state,
            ApiKey.ADD_OFFSETS_TO_TXN,
            version,
            AddOffsetsToTxnRequest(
                transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
            ),
        )
        desc = await call(
            txn_state,
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            DescribeTransactionsRequest(transactional_ids=["tx"]),
        )
        return response, desc

    response, desc = run(txn_state, scenario)
    assert response.error_code == ErrorCode.NONE
    topics = {t.topic for t in desc.transaction_states[0].topics}
    assert topics == {"t", "__consumer_offsets"}


# -- DescribeTransactions / ListTransactions ---------------------------------------------------


def test_describe_and_list_transactions(txn_state):
    async def scenario():
        pid, epoch = await begin(txn_state, "alpha", parts=[0, 2])
        await find_txn(txn_state, "beta")
        await init(txn_state, "beta")
        describe = await call(
            txn_state,
            ApiKey.DESCRIBE_TRANSACTIONS,
            0,
            DescribeTransactionsRequest(transactional_ids=["alpha", "nope"]),
        )

        async def listing(version, **filters):
            request = ListTransactionsRequest(**filters)
            return await call(txn_state, ApiKey.LIST_TRANSACTIONS, version, request)

        lists = [
            await listing(0),
            await listing(0, state_filters=["Ongoing", "Bogus"]),
            await listing(0, producer_id_filters=[pid]),
            await listing(1, duration_filter=3_600_000),
            await listing(2, transactional_id_pattern="b.*"),
            await listing(2, transactional_id_pattern="("),
        ]
        return pid, epoch, describe, lists

    pid, epoch, describe, lists = run(txn_state, scenario)
    alpha, nope = describe.transaction_states
    assert (alpha.error_code, alpha.transaction_state) == (ErrorCode.NONE, "Ongoing")
    assert (alpha.producer_id, alpha.producer_epoch) == (pid, epoch)
    assert alpha.transaction_timeout_ms == 60000 and alpha.transaction_start_time_ms > 0
    assert [(t.topic, sorted(t.partitions)) for t in alpha.topics] == [("t", [0, 2])]
    assert nope.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

    def ids(response):
        return [t.transactional_id for t in response.transaction_states]

    everything, ongoing, by_pid, long_open, pattern, bad = lists
    assert ids(everything) == ["alpha", "beta"]
    assert ids(ongoing) == ["alpha"] and ongoing.unknown_state_filters == ["Bogus"]
    assert ids(by_pid) == ["alpha"]
    assert "alpha" not in ids(long_open)  # open for less than an hour
    assert ids(pattern) == ["beta"]
    assert bad.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION


# -- WriteTxnMarkers ---------------------------------------------------------------------------


def _markers_request(pid, epoch, coordinator_epoch, commit=False, partitions=(0,)):
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    return WriteTxnMarkersRequest(
        markers=[
            marker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                coordinator_epoch=coordinator_epoch,
                topics=[
                    marker.WritableTxnMarkerTopic(name="t", partition_indexes=list(partitions))
                ],
            )
        ]
    )


async def _call_from(state, peer, api_key, version, request):
    api = lookup(api_key, version)
    request = api.request_cls.decode(request.encode(version), version)
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1)
    response = await api.handler(RequestContext(state, peer, None), header, request)
    return api.response_cls.decode(response.encode(version), version)


def _marker_codes(response):
    return [p.error_code for m in response.markers for t in m.topics for p in t.partitions]


def _hang(state, pid):
    """A transactional batch with no coordinator behind it: a hanging transaction."""
    batch = make_batch([b"hung"], producer_id=pid, producer_epoch=0, base_sequence=0,
                       is_transactional=True)  # fmt: skip
    return call(state, ApiKey.PRODUCE, 9, produce_request("t", {0: batch}))


@pytest.mark.parametrize("version", [1, 2])
def test_write_txn_markers_is_refused_unless_enabled_and_loopback(state_factory, version):
    enabled = state_factory("on", **{"onceflow.admin.allow.write.txn.markers": True})
    disabled = state_factory("off")
    for state in (enabled, disabled):
        create(state, "t", 1)

    async def scenario():
        await _hang(enabled, 900)
        await _hang(disabled, 900)
        return [
            await _call_from(disabled, "127.0.0.1:1", ApiKey.WRITE_TXN_MARKERS, version,
                             _markers_request(900, 0, 0)),
            await _call_from(enabled, "10.1.2.3:1", ApiKey.WRITE_TXN_MARKERS, version,
                             _markers_request(900, 0, 0)),
            await _call_from(enabled, "127.0.0.1:1", ApiKey.WRITE_TXN_MARKERS, version,
                             _markers_request(900, 0, 0, commit=True)),
        ]  # fmt: skip

    for response in run(enabled, scenario):
        assert _marker_codes(response) == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    for state in (enabled, disabled):
        assert state.get_log("t", 0).last_stable_offset == 0  # still hanging


@pytest.mark.parametrize("peer", ["127.0.0.1:5000", "[::1]:5000"])
def test_admin_abort_ends_a_hanging_transaction(state_factory, peer, caplog):
    caplog.set_level(logging.INFO, logger="onceflow")
    state = state_factory(**{"onceflow.admin.allow.write.txn.markers": True})
    create(state, "t", 1)

    async def scenario():
        await _hang(state, 901)
        stale = await _call_from(state, peer, ApiKey.WRITE_TXN_MARKERS, 1,
                                 _markers_request(901, -5, 0))  # fmt: skip
        unknown = await _call_from(state, peer, ApiKey.WRITE_TXN_MARKERS, 1,
                                   _markers_request(901, 0, 0, partitions=(4,)))  # fmt: skip
        hung_lso = state.get_log("t", 0).last_stable_offset
        abort = await _call_from(state, peer, ApiKey.WRITE_TXN_MARKERS, 1,
                                 _markers_request(901, 0, 0))  # fmt: skip
        data, aborted = await read_committed(state, 0)
        return stale, unknown, hung_lso, abort, data, aborted

    stale, unknown, hung_lso, abort, data, aborted = run(state, scenario)
    assert _marker_codes(stale) == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert _marker_codes(unknown) == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert hung_lso == 0
    assert _marker_codes(abort) == [ErrorCode.NONE]
    assert data.last_stable_offset == 2 and aborted == {(901, 0)}
    assert visible(data, aborted) == []
    # a refused abort is a warning; a successful one is an operator's action, logged as info
    levels = {
        r.getMessage().rsplit(": ", 1)[-1]: r.levelname
        for r in caplog.records
        if r.getMessage().startswith("admin ABORT marker")
    }
    assert levels == {
        "INVALID_PRODUCER_EPOCH": "WARNING",
        "UNKNOWN_TOPIC_OR_PARTITION": "WARNING",
        "NONE": "INFO",
    }


# -- metrics -----------------------------------------------------------------------------------


def test_metrics_count_transactional_ids_by_state_and_completed_transactions(txn_state):
    async def scenario():
        await begin(txn_state, "a")
        for transactional_id, commit in (("b", True), ("c", False), ("b", True)):
            pid, epoch = await begin(txn_state, transactional_id)
            await end_txn(txn_state, transactional_id, pid, epoch, commit)
            await txn_state.transactions.coordinator.wait_for_completions()
        return txn_state.metrics.render(txn_state)

    text = run(txn_state, scenario)
    assert 'onceflow_transactional_ids{state="Ongoing"} 1' in text
    assert 'onceflow_transactional_ids{state="CompleteCommit"} 1' in text
    assert 'onceflow_transactional_ids{state="CompleteAbort"} 1' in text
    got = samples(text)
    assert got["onceflow_transactions_committed_total"] == "2"  # "b" twice
    assert got["onceflow_transactions_aborted_total"] == "1"
    assert 'onceflow_partition_last_stable_offset{topic="t",partition="1"} 0' in text


def test_metrics_show_hanging_transactions_fencing_group_lag_and_flushes(txn_state):
    """broker.metrics_eos: a transaction open past transaction.max.timeout.ms is hanging; a
    second InitProducerId of an id fences its producer; a group's lag is the LSO minus its
    committed offset; every acks=all produce's fsync lands in the flush histogram."""
    coordinator = txn_state.transactions.coordinator
    commit = offset_commit_request("lagging", "t", 2, 1)

    async def scenario():
        plain = produce_request("t", {2: make_batch([b"a", b"b", b"c"])})
        assert (
            partition_results(await call(txn_state, ApiKey.PRODUCE, 9, plain))[("t", 2)].error_code
            == 0
        )
        txn_state.load_coordinators()  # the group coordinator, for the commit below
        assert (await call(txn_state, ApiKey.OFFSET_COMMIT, 2, commit)).topics[0].partitions[
            0
        ].error_code == 0
        pid, epoch = await begin(txn_state, "old")
        assert (await txn_produce(txn_state, "old", pid, epoch, 0, 0, [b"x"])).error_code == 0
        assert (await find_txn(txn_state, "restarted")).error_code == 0
        assert (await init(txn_state, "restarted"))[0] == 0
        assert (await init(txn_state, "restarted"))[0] == 0  # fences the first instance
        young = samples(txn_state.metrics.render(txn_state))
        now = coordinator.clock()
        coordinator.clock = lambda: now + coordinator.config.transaction_max_timeout_ms + 1
        return young, samples(txn_state.metrics.render(txn_state))

    young, old = run(txn_state, scenario)
    assert young["onceflow_transactions_hanging"] == "0"
    assert old["onceflow_transactions_hanging"] == "1"  # "old"; "restarted" has none open
    assert float(old["onceflow_transaction_oldest_open_age_seconds"]) > float(
        coordinator.config.transaction_max_timeout_ms / 1000
    )
    assert old["onceflow_producers_fenced_total"] == "1"
    assert old['onceflow_consumer_group_lag{group="lagging",topic="t",partition="2"}'] == "2"
    flushes = int(old["onceflow_log_flush_seconds_count"])
    assert flushes >= 2  # the plain and the transactional produce, at least
    assert old['onceflow_log_flush_seconds_bucket{le="+Inf"}'] == str(flushes)


# -- long polls woken by markers ---------------------------------------------------------------


async def _commit_by_coordinator(state):
    pid, epoch = await begin(state, "w")
    assert (await txn_produce(state, "w", pid, epoch, 0, 0, [b"txn"])).error_code == ErrorCode.NONE
    yield  # the read_committed fetch parks here (the LSO is pinned at 0)
    assert (await end_txn(state, "w", pid, epoch, True)).error_code == ErrorCode.NONE


async def _abort_by_admin(state):
    await _hang(state, 902)
    yield
    response = await _call_from(state, "127.0.0.1:1", ApiKey.WRITE_TXN_MARKERS, 1,
                                _markers_request(902, 0, 0))  # fmt: skip
    assert _marker_codes(response) == [ErrorCode.NONE]


@pytest.mark.parametrize(
    ("steps", "aborted"), [(_commit_by_coordinator, set()), (_abort_by_admin, {(902, 0)})]
)
def test_marker_wakes_a_read_committed_long_poll(state_factory, steps, aborted):
    """A read_committed fetch parked behind an open transaction answers as soon as a marker
    moves the LSO, whoever writes it (the coordinator after EndTxn, or the admin abort). The
    topic has flush.on.ack=false, so no fsync round wakes the fetch instead: only the log's
    offsets event on the marker's append can."""
    state = state_factory(**TXN_PROPS, **{"onceflow.admin.allow.write.txn.markers": True})
    create(state, "t", 1, **{"flush.on.ack": "false"})

    async def scenario():
        script = steps(state)
        await anext(script)
        request = fetch_request("t", {0: 0}, max_wait_ms=10_000)
        request.isolation_level = 1
        fetch = asyncio.ensure_future(call(state, ApiKey.FETCH, 12, request))
        await asyncio.sleep(0.3)
        assert not fetch.done()
        started = time.monotonic()
        with pytest.raises(StopAsyncIteration):
            await anext(script)
        response = await asyncio.wait_for(fetch, 15)
        return response.responses[0].partitions[0], time.monotonic() - started

    data, waited = run(state, scenario)
    assert waited < 2.0, f"the fetch waited {waited:.1f}s: not woken by the marker"
    assert data.last_stable_offset == 2
    assert {(a.producer_id, a.first_offset) for a in data.aborted_transactions} == aborted
