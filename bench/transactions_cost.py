"""The cost of transactions: transactional vs idempotent produce, read_committed vs
read_uncommitted consumption, side by side against one local onceflow broker.

Starts `onceflow broker` as a child process (default configuration: acks=all appends fsynced by
group commit) on a temporary data directory with two topics of `--partitions` partitions, then
runs `--rounds` rounds, each side once per round, the order flipping every round, so that
machine noise and cache warmth hit both sides alike:

- produce: an idempotent confluent-kafka producer (acks=all) writes 1 KiB records to `idem` for
  `--seconds`; then a transactional one writes to `txn` for as long, committing every
  `--commit-ms` (100 ms, Kafka's reference point). Only acknowledged (idempotent) or committed
  (transactional) bytes count.
- consume: the whole `txn` topic (records, COMMIT markers) is read from the beginning with
  isolation.level=read_uncommitted and with read_committed, alternately.

Reports the median MB/s of each side and the cost in percent (1 - slower/faster), appends the
run to bench/results/transactions_cost.json and prints one line. Kafka reports about 3% produce
cost for this setting and no read_committed degradation (targets: <= 3% and <= 2%).

    .venv/bin/python bench/transactions_cost.py                 # 3 rounds of 8 s
    .venv/bin/python bench/transactions_cost.py --rounds 5 --seconds 10
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).parent))
from broker_throughput import append_result, machine  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "transactions_cost.json"
TARGET_COST_PERCENT = {"produce": 3.0, "consume": 2.0}


def _producer_config(
    bootstrap: str, args: argparse.Namespace, idempotence: bool = True
) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": idempotence,
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "queue.buffering.max.kbytes": args.queue_kbytes,
        "compression.type": "none",
    }


def produce_idempotent(
    bootstrap: str,
    args: argparse.Namespace,
    value: bytes,
    topic: str = "idem",
    idempotence: bool = True,
) -> dict:
    """Produce to `topic` for `args.seconds` (idempotent unless `idempotence` is False);
    acknowledged bytes per second."""
    acked = failed = 0

    def on_delivery(err, _msg) -> None:
        nonlocal acked, failed
        if err is None:
            acked += 1
        else:
            failed += 1

    producer = Producer(_producer_config(bootstrap, args, idempotence))
    sent = 0
    start = time.monotonic()
    deadline = start + args.seconds
    while time.monotonic() < deadline:
        try:
            producer.produce(
                topic, value, partition=sent % args.partitions, on_delivery=on_delivery
            )
            sent += 1
        except BufferError:
            producer.poll(0.005)
        if sent % 500 == 0:
            producer.poll(0)
    producer.flush(120)
    seconds = time.monotonic() - start
    if failed:
        raise RuntimeError(f"{failed} records to {topic} failed")
    size = acked * len(value)
    return {"records": acked, "seconds": seconds, "mb_per_s": size / 1e6 / seconds}


def produce_transactional(
    bootstrap: str, args: argparse.Namespace, value: bytes, tid: str, topic: str = "txn"
) -> dict:
    """Produce to `topic` for `args.seconds`, committing every `args.commit_ms`."""
    acked = failed = 0

    def on_delivery(err, _msg) -> None:  # the same per-record work as the idempotent side
        nonlocal acked, failed
        if err is None:
            acked += 1
        else:
            failed += 1

    producer = Producer(_producer_config(bootstrap, args) | {"transactional.id": tid})
    producer.init_transactions(30)
    committed = transactions = sent = 0
    start = time.monotonic()
    deadline = start + args.seconds
    while time.monotonic() < deadline:
        producer.begin_transaction()
        in_txn = 0
        commit_at = time.monotonic() + args.commit_ms / 1000
        while time.monotonic() < commit_at:
            try:
                producer.produce(
                    topic, value, partition=sent % args.partitions, on_delivery=on_delivery
                )
                sent += 1
                in_txn += 1
            except BufferError:
                producer.poll(0.005)
            if sent % 500 == 0:
                producer.poll(0)
        producer.commit_transaction(60)
        committed += in_txn
        transactions += 1
    seconds = time.monotonic() - start
    if failed or acked != committed:
        raise RuntimeError(f"transactional: {failed} failed, {acked} acked of {committed}")
    size = committed * len(value)
    return {
        "records": committed,
        "transactions": transactions,
        "seconds": seconds,
        "mb_per_s": size / 1e6 / seconds,
    }


def consume(
    bootstrap: str, args: argparse.Namespace, isolation: str, records: int, topic: str = "txn"
) -> dict:
    """Read `records` records of `topic` from the beginning with `isolation`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-assign-only",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "queued.max.messages.kbytes": 512 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(args.partitions)])
    got = size = 0
    start = time.monotonic()
    deadline = start + 300
    try:
        while got < records and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"consume ({isolation}): {err}")
                if err is None:
                    got += 1
                    size += len(msg.value())
    finally:
        consumer.close()
    seconds = time.monotonic() - start
    if got != records:
        raise RuntimeError(f"{isolation}: consumed {got} of {records} records")
    return {"records": got, "seconds": seconds, "mb_per_s": size / 1e6 / seconds}


def cost_percent(baseline: float, measured: float) -> float:
    """How much slower `measured` is than `baseline`, in percent (negative: faster)."""
    return (1 - measured / baseline) * 100


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """The produce load's options (rounds, run length, commits, record and batch sizes),
    shared with kafka_side_by_side.py."""
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0, help="per produce run")
    parser.add_argument("--commit-ms", type=int, default=100)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument(
        "--queue-kbytes",
        type=int,
        default=16 * 1024,
        help="producer queue.buffering.max.kbytes: a bounded queue makes the produce loop wait "
        "instead of spinning, so the client does not starve the broker of CPU",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_arguments(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    value = os.urandom(args.record_size)
    data_dir = Path(tempfile.mkdtemp(prefix="onceflow-bench-txn-"))
    broker = EmbeddedBroker(data_dir, 30)
    runs: dict[str, list[dict]] = {
        "idempotent": [],
        "transactional": [],
        "read_uncommitted": [],
        "read_committed": [],
    }
    try:
        with AdminClient({"bootstrap.servers": broker.address}) as admin:
            for topic in ("idem", "txn"):
                result = admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic]
                result.raise_for_error()
        for round_no in range(args.rounds):  # the order flips every round
            sides = ["idempotent", "transactional"][:: 1 if round_no % 2 == 0 else -1]
            for side in sides:
                if side == "idempotent":
                    runs[side].append(produce_idempotent(broker.address, args, value))
                else:
                    tid = f"bench-{round_no}"
                    runs[side].append(produce_transactional(broker.address, args, value, tid))
        total = sum(r["records"] for r in runs["transactional"])
        for round_no in range(args.rounds):
            isolations = ["read_uncommitted", "read_committed"][:: 1 if round_no % 2 == 0 else -1]
            for isolation in isolations:
                runs[isolation].append(consume(broker.address, args, isolation, total))
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)

    median = {k: statistics.median(r["mb_per_s"] for r in v) for k, v in runs.items()}
    costs = {
        "produce": cost_percent(median["idempotent"], median["transactional"]),
        "consume": cost_percent(median["read_uncommitted"], median["read_committed"]),
    }
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    summary = (
        f"{now} transactions cost: produce idempotent {median['idempotent']:.1f} MB/s vs "
        f"transactional (commit every {args.commit_ms} ms) {median['transactional']:.1f} MB/s "
        f"= {costs['produce']:.1f}% (target <= {TARGET_COST_PERCENT['produce']:.0f}%); consume "
        f"read_uncommitted {median['read_uncommitted']:.1f} MB/s vs read_committed "
        f"{median['read_committed']:.1f} MB/s = {costs['consume']:.1f}% (target <= "
        f"{TARGET_COST_PERCENT['consume']:.0f}%); medians of {args.rounds} rounds, "
        f"{machine()['cpu_count']} CPUs"
    )
    run = {
        "date": now,
        "machine": machine(),
        "config": {
            "record_size": args.record_size,
            "partitions": args.partitions,
            "acks": "all",
            "linger_ms": args.linger_ms,
            "batch_size": args.batch_size,
            "queue_kbytes": args.queue_kbytes,
            "commit_ms": args.commit_ms,
            "seconds_per_produce_run": args.seconds,
            "rounds": args.rounds,
            "broker": "default config (fsync on acks=all via group commit), subprocess",
            "client": "confluent-kafka " + __import__("confluent_kafka").version()[0],
        },
        "runs": runs,
        "median_mb_per_s": median,
        "cost_percent": costs,
        "targets_cost_percent": TARGET_COST_PERCENT,
        "targets_met": {k: costs[k] <= v for k, v in TARGET_COST_PERCENT.items()},
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
