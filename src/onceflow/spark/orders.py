"""The demo's data: orders to feed in (some in aborted transactions), the validated orders the
pipeline must write, and the exactly-once check of its output topic.

Used by `onceflow demo`, the crash tests and the Spark benchmarks, so that all of them check
the same thing: every committed input order appears exactly once in the output with the right
value, no order from an aborted input transaction appears, and no transaction is left open on
the output (last stable offset == high watermark).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.client.consumer import Consumer
from onceflow.client.consumer.completed_fetch import ConsumerRecord
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition

__all__ = [
    "ABORTED_BASE",
    "OutputCheck",
    "check_output",
    "end_offsets",
    "feed_orders",
    "order_value",
    "read_committed",
    "validated_value",
    "wait_until_stable",
]

ABORTED_BASE = 1_000_000_000  # orders written in aborted transactions have ids from here


def _amount(order_id: int) -> int:
    return 0 if order_id % 10 == 9 else 100 + order_id % 9_000  # every 10th order is invalid


def order_value(order_id: int, padding: int = 0) -> bytes:
    """Input order `order_id` as JSON (with `padding` bytes of a note, for bigger records)."""
    note = f', "note": "{"x" * padding}"' if padding else ""
    return (
        f'{{"id": {order_id}, "customer": "c{order_id % 97}", "amount_cents": '
        f'{_amount(order_id)}, "quantity": {1 + order_id % 4}{note}}}'
    ).encode()


def validated_value(order_id: int) -> dict[str, Any]:
    """What the pipeline must output for order `order_id` (parsed JSON)."""
    amount, quantity = _amount(order_id), 1 + order_id % 4
    out: dict[str, Any] = {"id": order_id, "customer": f"c{order_id % 97}"}
    if amount > 0:
        out.update(total_cents=amount * quantity, status="accepted")
    else:
        out.update(status="rejected", reason="amount must be positive")
    return out


@dataclass
class FeedResult:
    committed_ids: list[int] = field(default_factory=list)
    aborted_ids: list[int] = field(default_factory=list)
    transactions: int = 0
    aborted_transactions: int = 0


def feed_orders(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    txn_size: int = 100,
    abort_every: int = 5,
    seed: int = 7,
    padding: int = 0,
    first_id: int = 0,
    progress: Callable[[int], None] | None = None,
) -> FeedResult:
    """Write orders `first_id .. first_id+count-1` in committed transactions of `txn_size`,
    and after every `abort_every` of them one aborted transaction of random orders with ids
    from ABORTED_BASE up (so a read_committed reader must skip them)."""
    rng = random.Random(seed)
    result = FeedResult()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"onceflow-demo-feeder-{topic}"}
    )
    try:
        producer.init_transactions(60)
        order_id, end = first_id, first_id + count
        while order_id < end:
            ids = range(order_id, min(order_id + txn_size, end))
            producer.begin_transaction()
            for i in ids:
                producer.send(topic, order_value(i, padding), key=f"order-{i}")
            producer.commit_transaction(60)
            result.committed_ids.extend(ids)
            result.transactions += 1
            order_id = ids[-1] + 1
            if progress is not None:
                progress(len(result.committed_ids))
            if result.transactions % abort_every == 0:
                producer.begin_transaction()
                for _ in range(rng.randint(1, txn_size)):
                    bad = ABORTED_BASE + rng.randrange(10**9)
                    producer.send(topic, order_value(bad, padding), key=f"order-{bad}")
                    result.aborted_ids.append(bad)
                producer.flush(60)  # in the log before the abort: a reader must skip them
                producer.abort_transaction(60)
                result.aborted_transactions += 1
    finally:
        producer.close()
    return result


def end_offsets(bootstrap: str, topic: str, partitions: int, read_committed: bool) -> list[int]:
    """Per partition: the last stable offset (read_committed) or the high watermark."""
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        results = admin.list_offsets(
            {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
            isolation_level=1 if read_committed else 0,
        )
    return [results[TopicPartition(topic, p)].offset for p in range(partitions)]


def wait_until_stable(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> bool:
    """Wait until no transaction is open on `topic` (LSO == high watermark on every
    partition): Kafka writes a commit's transaction markers after EndTxn has answered, so a
    read right after a commit may not see it yet. False when `timeout` passed first."""
    deadline = time.monotonic() + timeout
    while True:
        if end_offsets(bootstrap, topic, partitions, True) == end_offsets(
            bootstrap, topic, partitions, False
        ):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def read_committed(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> list[ConsumerRecord]:
    """Every record of `topic` a read_committed consumer sees, up to the current LSO."""
    ends = end_offsets(bootstrap, topic, partitions, read_committed=True)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    out: list[ConsumerRecord] = []
    try:
        consumer.assign([(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while not all(consumer.position((topic, p)) >= ends[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} up to offsets {ends}")
            out.extend(r for r in consumer.poll(0.5) if r.offset < ends[r.partition])
    finally:
        consumer.close()
    return out


@dataclass
class OutputCheck:
    """The exactly-once check of the pipeline's output."""

    outputs: int = 0
    duplicates: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    aborted_seen: list[int] = field(default_factory=list)
    wrong: list[int] = field(default_factory=list)
    unexpected: list[int] = field(default_factory=list)

    def problems(self) -> list[str]:
        out = []
        for name in ("duplicates", "missing", "aborted_seen", "wrong", "unexpected"):
            ids = getattr(self, name)
            if ids:
                out.append(f"{len(ids)} {name.replace('_', ' ')} (e.g. orders {ids[:5]})")
        return out


def check_output(
    records: Iterable[Any], expected_ids: Iterable[int], complete: bool = True
) -> OutputCheck:
    """Compare output records with the committed input orders (`complete=False`: only that
    nothing is duplicated, wrong or unexpected, for a run still in progress)."""
    check = OutputCheck()
    counts: dict[int, int] = {}
    for record in records:
        check.outputs += 1
        try:
            value = json.loads(record.value)
            order_id = int(value["id"])
        except (TypeError, ValueError, KeyError):
            check.wrong.append(-1)
            continue
        counts[order_id] = counts.get(order_id, 0) + 1
        if value != validated_value(order_id) or record.key != f"order-{order_id}".encode():
            check.wrong.append(order_id)
    expected = set(expected_ids)
    check.duplicates = sorted(i for i, n in counts.items() if n > 1)
    check.aborted_seen = sorted(i for i in counts if i >= ABORTED_BASE)
    check.unexpected = sorted(i for i in counts if i not in expected and i < ABORTED_BASE)
    if complete:
        check.missing = sorted(expected - set(counts))
    return check
