"""RecordAccumulator: batching, readiness, draining, retries, buffer memory; and the batch
writer against the records package's decoder (the reference)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.client.errors import IllegalStateError, KafkaTimeoutError
from onceflow.client.producer.accumulator import ProducerBatch, RecordAccumulator, sequence_before
from onceflow.client.producer.record_writer import RecordBatchWriter
from onceflow.records.batch import parse_header, verify_crc
from onceflow.records.compression import CompressionType
from onceflow.records.record import decode_records

TP0, TP1, TP2 = ("t", 0), ("t", 1), ("u", 0)


class Wakeups:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def make(**overrides) -> tuple[RecordAccumulator, Wakeups]:
    wakeups = Wakeups()
    options = dict(
        batch_size=1000,
        linger_ms=10,
        compression=0,
        retry_backoff_ms=100,
        buffer_memory=1 << 20,
        max_block_ms=50,
        wakeup=wakeups,
    )
    options.update(overrides)
    return RecordAccumulator(**options), wakeups


def leaders(mapping):
    return lambda tp: mapping.get(tp)


def drain_all(acc, node_tps, now=0, prepare=lambda b: True, max_size=1 << 20):
    return acc.drain(node_tps, max_size, now, prepare)


# ---------------------------------------------------------------- append and wake-ups


def test_records_share_a_batch_and_wake_only_on_new_or_full() -> None:
    acc, wakeups = make()
    futures = [acc.append(TP0, 1000 + i, None, b"x" * 10) for i in range(5)]
    assert wakeups.count == 1  # the new batch
    assert [f._index for f in futures] == [0, 1, 2, 3, 4]
    assert len({id(f._result) for f in futures}) == 1


def test_batch_size_closes_batches() -> None:
    acc, wakeups = make(batch_size=300)
    for _ in range(10):
        acc.append(TP0, 1000, None, b"x" * 100)
    queue = acc._queues[TP0]
    assert len(queue) > 1
    assert all(b.full for b in list(queue)[:-1])
    assert all(b.size_bytes() <= 300 for b in queue)
    assert wakeups.count >= len(queue)


def test_record_larger_than_batch_size_gets_its_own_batch() -> None:
    acc, _ = make(batch_size=100)
    acc.append(TP0, 1000, None, b"x" * 500)
    (batch,) = acc._queues[TP0]
    assert batch.record_count == 1 and batch.full


@pytest.mark.parametrize(
    ("queued", "expect_new"),
    [(0, True), (1, False)],
)
def test_abort_on_new_batch(queued: int, expect_new: bool) -> None:
    acc, _ = make()
    for _ in range(queued):
        acc.append(TP0, 1000, None, b"v")
    result = acc.append(TP0, 1000, None, b"v", (), abort_on_new_batch=True)
    assert (result is None) is expect_new
    if result is None:
        assert acc.stats()["buffered_bytes"] == 0  # the reservation was given back


def test_append_after_close_raises() -> None:
    acc, _ = make()
    acc.close()
    with pytest.raises(IllegalStateError, match="after producer has been closed"):
        acc.append(TP0, 1, None, b"v")


def test_buffer_memory_blocks_then_times_out() -> None:
    acc, _ = make(buffer_memory=200, max_block_ms=50)
    acc.append(TP0, 1, None, b"x" * 150)
    with pytest.raises(
        KafkaTimeoutError,
        match="Failed to allocate memory within the configured max blocking time 50 ms",
    ):
        acc.append(TP0, 1, None, b"x" * 150)


def test_buffer_memory_is_released_on_deallocate() -> None:
    acc, _ = make(buffer_memory=200, max_block_ms=2000)
    acc.append(TP0, 1, None, b"x" * 150)
    (batch,) = acc._queues[TP0]
    timer = threading.Timer(0.05, lambda: acc.deallocate(batch))
    timer.start()
    acc.append(TP1, 1, None, b"x" * 150)  # waits for the release
    timer.join()


# ---------------------------------------------------------------- ready and drain


@pytest.mark.parametrize(
    ("now", "full", "flushing", "expect_ready", "expect_delay"),
    [
        (0, False, False, False, 10),  # lingering
        (4, False, False, False, 6),
        (10, False, False, True, None),  # linger.ms passed
        (0, True, False, True, None),  # full
        (0, False, True, True, None),  # flush
    ],
)
def test_ready(monkeypatch, now, full, flushing, expect_ready, expect_delay) -> None:
    monkeypatch.setattr("onceflow.client.producer.accumulator.now_ms", lambda: 0)
    acc, _ = make()
    acc.append(TP0, 1, None, b"v")
    acc._queues[TP0][0].full = full
    if flushing:
        acc.begin_flush()
    check = acc.ready(now, leaders({TP0: 1}))
    assert (1 in check.nodes) is expect_ready
    if expect_delay is not None:
        assert check.next_delay_ms == expect_delay


def test_unknown_leader_reported() -> None:
    acc, _ = make()
    acc.append(TP2, 1, None, b"v")
    check = acc.ready(10**12, leaders({}))
    assert check.unknown_leader_topics == {"u"} and not check.nodes


def test_drain_one_batch_per_partition_and_respects_max_request_size() -> None:
    acc, _ = make(batch_size=200)
    for tp in (TP0, TP1):
        for _ in range(4):
            acc.append(tp, 1, None, b"x" * 100)
    drained = drain_all(acc, {1: [TP0, TP1]})
    assert [b.tp for b in drained[1]] == [TP0, TP1]
    one = drain_all(acc, {1: [TP0, TP1]}, max_size=10)
    assert len(one[1]) == 1  # the first batch always goes, even if over the limit


def test_drain_respects_prepare_veto_and_builds_batches() -> None:
    acc, _ = make()
    acc.append(TP0, 1, b"k", b"v")
    acc.append(TP1, 1, b"k", b"v")
    drained = drain_all(acc, {1: [TP0, TP1]}, prepare=lambda b: b.tp == TP1)
    (batch,) = drained[1]
    assert batch.tp == TP1 and batch.buffer is not None and batch.builder is None
    assert acc.has_undrained()


def test_reenqueue_orders_by_sequence_and_backs_off() -> None:
    acc, _ = make()
    batches = []
    for seq in (0, 1, 2):
        b = ProducerBatch(TP0, 0, 0)
        b.builder.append(1, None, b"v")
        b.record_count = 1
        b.base_sequence = seq
        batches.append(b)
    acc.append(TP0, 1, None, b"new")
    for b in (batches[2], batches[0], batches[1]):
        acc.reenqueue(b, now=1000)
    queue = list(acc._queues[TP0])
    assert [b.base_sequence for b in queue[:3]] == [0, 1, 2]
    assert queue[3].base_sequence == -1
    check = acc.ready(1050, leaders({TP0: 1}))
    assert not check.nodes and check.next_delay_ms == 50
    assert drain_all(acc, {1: [TP0]}, now=1050) == {}
    assert drain_all(acc, {1: [TP0]}, now=1100)[1] == [batches[0]]


def test_expired_batches() -> None:
    acc, _ = make()
    acc.append(TP0, 1, None, b"v")
    created = acc._queues[TP0][0].created_ms
    assert acc.expired_batches(created + 99, 100) == []
    assert len(acc.expired_batches(created + 100, 100)) == 1
    assert not acc.has_undrained()


@pytest.mark.parametrize(
    ("a", "b", "before"),
    [(0, 1, True), (1, 0, False), (2**31 - 1, 0, True), (0, 2**31 - 1, False), (5, 5, False)],
)
def test_sequence_before_wraps(a: int, b: int, before: bool) -> None:
    assert sequence_before(a, b) is before


# ---------------------------------------------------------------- batch writer

record_strategy = st.tuples(
    st.integers(min_value=0, max_value=20_000),  # timestamp delta (table and slow path)
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=300),
    st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2),
)


@given(st.lists(record_strategy, min_size=1, max_size=30), st.sampled_from(list(CompressionType)))
def test_writer_output_decodes_to_the_same_records(records, codec) -> None:
    writer = RecordBatchWriter(codec)
    base = 1_700_000_000_000
    for delta, key, value, headers in records:
        writer.append(base + delta, key, value, headers)
    batch = writer.build(5, 2, 17, int(codec))
    header = parse_header(batch)
    assert verify_crc(batch, header)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 2, 17)
    assert header.records_count == len(records) and header.compression == codec
    assert header.base_timestamp == base + records[0][0]
    assert header.max_timestamp == base + max(r[0] for r in records)
    decoded = decode_records(batch)
    for i, (record, (delta, key, value, headers)) in enumerate(zip(decoded, records, strict=True)):
        assert record.offset_delta == i
        assert header.base_timestamp + record.timestamp_delta == base + delta
        assert (record.key, record.value, list(record.headers)) == (key, value, list(headers))


def test_set_producer_state_patches_built_batch() -> None:
    batch = ProducerBatch(TP0, 0, 0)
    batch.builder.append(1, None, b"v")
    batch.record_count = 1
    batch.set_producer_state(1, 0, 0)
    built = batch.close()
    batch.set_producer_state(9, 3, 40)
    header = parse_header(built)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 3, 40)
    assert verify_crc(built, header)
