"""Durability across restarts: clean restart, kill -9 under load, and a corrupted segment tail.

The claims under test:

- a clean restart (SIGTERM) on the same data directory keeps every record and every offset;
- after kill -9 during a steady acks=all produce, every acknowledged record is present at the
  offset its delivery report named, byte for byte; the log has no holes and no record twice.
  The producer runs with `enable.idempotence=false` and `retries=0`, so no send is ever retried
  and therefore no record may appear twice; records whose send failed may or may not be present
  (the broker may have written them before it died), and that count is reported, not asserted.
  kill -9 ends the process, not the machine: the page cache survives, so this checks that no
  acknowledged record was still in the broker's own buffers and that recovery leaves a
  consistent log; it cannot check fsync itself (the benchmark runs with fsync on);
- a segment whose last batch was damaged after a crash (bytes flipped, or the file cut
  mid-batch) is truncated to the last valid batch on restart, the broker's log says so, and the
  partition accepts new records at the truncated end. (After a clean shutdown Kafka skips
  recovery, so the test crashes the broker with kill -9 before damaging the segment.)
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from interop.workload import (
    check_exact_round_trip,
    consume_confluent,
    create_topic,
    produce_confluent,
    record_value,
)

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.common import TopicPartition

PARTITIONS = 3


def _offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """(earliest, latest) offsets per partition, via onceflow's AdminClient."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        earliest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()))
        latest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()))
    return {tp.partition: (earliest[tp].offset, latest[tp].offset) for tp in tps}


def test_clean_restart_keeps_data_and_offsets(broker):
    n = 30_000
    create_topic(broker.bootstrap, "durable", PARTITIONS)
    produced = produce_confluent(broker.bootstrap, "durable", range(n), PARTITIONS)
    assert produced.failed == []
    before = _offsets(broker.bootstrap, "durable", PARTITIONS)
    assert before == {p: (0, n // PARTITIONS) for p in range(PARTITIONS)}

    broker.restart()

    assert _offsets(broker.bootstrap, "durable", PARTITIONS) == before
    consumed, _ = consume_confluent(broker.bootstrap, "durable", PARTITIONS, n, timeout=60)
    assert check_exact_round_trip(consumed, n, PARTITIONS) == []
    # new records continue at the old log end offsets
    more = produce_confluent(broker.bootstrap, "durable", range(n, n + 300), PARTITIONS)
    assert more.failed == []
    for partition, offset, seq in more.acked:
        assert offset == before[partition][1] + (seq - n) // PARTITIONS


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_kill_9_loses_no_acknowledged_record(broker):
    """kill -9 while a confluent-kafka producer (acks=all, no retries) is mid-stream."""
    from confluent_kafka import Producer

    topic = "crash"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    acked: dict[tuple[int, int], int] = {}  # (partition, offset) -> seq
    failed: list[int] = []

    def on_delivery(err, msg) -> None:
        seq = int(msg.value()[:10])
        if err is None:
            acked[(msg.partition(), msg.offset())] = seq
        else:
            failed.append(seq)

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "linger.ms": 2,
            "batch.num.messages": 500,
            "message.timeout.ms": 20_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
        }
    )
    seq = 0
    killed_at = None
    deadline = time.monotonic() + 120
    # steady produce; kill -9 once 20 000 records are acknowledged, keep producing through the
    # restart, stop 10 000 records after the kill
    while time.monotonic() < deadline:
        if killed_at is None and len(acked) >= 20_000:
            killed_at = seq
            broker.restart(kill=True)
        if killed_at is not None and seq >= killed_at + 10_000:
            break
        try:
            producer.produce(
                topic, record_value(seq), partition=seq % PARTITIONS, on_delivery=on_delivery
            )
            seq += 1
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert killed_at is not None, "the producer never reached 20 000 acknowledged records"
    assert len(acked) + len(failed) == seq

    consumed, _ = consume_confluent(broker.bootstrap, topic, PARTITIONS, None, timeout=90)
    assert consumed.bad_values == []
    present: dict[tuple[int, int], int] = {}
    for partition, pairs in consumed.by_partition.items():
        offsets = [o for o, _ in pairs]
        seqs = [s for _, s in pairs]
        assert offsets == list(range(len(offsets))), f"p{partition}: holes in the log"
        assert len(set(seqs)) == len(seqs), f"p{partition}: a record appears twice"
        assert seqs == sorted(seqs), f"p{partition}: records out of send order"
        assert all(s % PARTITIONS == partition for s in seqs)
        present.update(((partition, o), s) for o, s in pairs)
    lost = {k: v for k, v in acked.items() if present.get(k) != v}
    assert lost == {}, f"{len(lost)} acknowledged records lost or moved, e.g. {list(lost)[:5]}"
    unacked_present = len(present) - len(acked)
    print(
        f"sent {seq}, acked {len(acked)}, failed {len(failed)}, "
        f"present after restart {len(present)} ({unacked_present} written but never acked)"
    )


# ---------------------------------------------------------------------- corrupted tail

_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length


def _batch_spans(segment: bytes) -> list[tuple[int, int, int]]:
    """(start, end, base offset) of each whole batch in a segment, read independently of
    onceflow.records: 8-byte base offset, 4-byte length, then `length` bytes."""
    spans, pos = [], 0
    while pos + 12 <= len(segment):
        base_offset, length = _BATCH_PREFIX.unpack_from(segment, pos)
        end = pos + 12 + length
        if length <= 0 or end > len(segment):
            break
        spans.append((pos, end, base_offset))
        pos = end
    return spans


def _last_offset(segment: bytes, start: int) -> int:
    base_offset = _BATCH_PREFIX.unpack_from(segment, start)[0]
    last_offset_delta = struct.unpack_from(">i", segment, start + 23)[0]
    return base_offset + last_offset_delta


def _flip_inside_last_batch(path: Path, spans) -> None:
    start, end, _ = spans[-1]
    data = bytearray(path.read_bytes())
    for pos in range(start + 70, min(end, start + 90)):  # inside the records, after the header
        data[pos] ^= 0x5A
    path.write_bytes(bytes(data))


def _cut_mid_last_batch(path: Path, spans) -> None:
    start, end, _ = spans[-1]
    with open(path, "r+b") as f:
        f.truncate(start + (end - start) // 2)


@pytest.mark.parametrize(
    "damage", [_flip_inside_last_batch, _cut_mid_last_batch], ids=["flipped", "cut"]
)
def test_corrupt_segment_tail_is_truncated_to_last_valid_batch(broker, damage):
    topic = "damaged"
    create_topic(broker.bootstrap, topic, 1)
    for start in range(0, 1000, 100):  # ten produce calls: at least ten batches
        out = produce_confluent(broker.bootstrap, topic, range(start, start + 100), 1)
        assert out.failed == []
    # a crash (no clean-shutdown marker), then the damage: recovery must run and find it
    broker.kill()

    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert segments, f"no segment files in {broker.data_dir / f'{topic}-0'}"
    segment = segments[-1]
    data = segment.read_bytes()
    spans = _batch_spans(data)
    assert len(spans) >= 2
    valid_end_offset = _last_offset(data, spans[-2][0]) + 1
    damage(segment, spans)
    log_before = broker.log_text()

    broker.start()
    new_log = broker.log_text()[len(log_before) :]
    assert "truncat" in new_log.lower(), f"recovery was not logged:\n{new_log}"
    assert f"{topic}-0" in new_log
    assert _offsets(broker.bootstrap, topic, 1) == {0: (0, valid_end_offset)}
    consumed, _ = consume_confluent(broker.bootstrap, topic, 1, None, timeout=30)
    assert check_exact_round_trip(consumed, valid_end_offset, 1) == []
    # the partition goes on at the truncated end
    more = produce_confluent(broker.bootstrap, topic, [5000], 1)
    assert [(p, o) for p, o, _ in more.acked] == [(0, valid_end_offset)]
