"""Broker throughput: confluent-kafka produce and consume MB/s against a local onceflow broker.

Starts `onceflow broker` as a child process (default configuration: acks=all appends are
fsynced by group commit before they are acknowledged) on a temporary data directory, creates a
topic, produces 1 KiB records over 3 partitions with acks=all until `--bytes` are acknowledged or
`--seconds` pass, then reads everything back with a confluent-kafka consumer (assign, from the
beginning). Appends the run (date, machine, config, results) to
bench/results/broker_throughput.json and prints one human-readable line.

    .venv/bin/python bench/broker_throughput.py              # 1 GiB or 120 s, whichever first
    .venv/bin/python bench/broker_throughput.py --bytes 256MiB --seconds 30
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic

RESULTS = Path(__file__).parent / "results" / "broker_throughput.json"
TARGETS_MB_S = {"produce": 150.0, "consume": 300.0}
TOPIC = "bench"


def append_result(path: Path, entry: dict) -> None:
    """Append `entry` to the JSON list of runs in `path` (created when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    history = json.loads(path.read_text()) if path.exists() else []
    history.append(entry)
    path.write_text(json.dumps(history, indent=2) + "\n")


def ratio(measured: float, baseline: float) -> float:
    """`measured / baseline`, NaN when the baseline is 0 (a tiny run can measure no broker CPU
    at all: the kernel counts it in 10 ms ticks)."""
    return measured / baseline if baseline else float("nan")


def parse_size(text: str) -> int:
    """'1GiB', '256MiB', '100MB' or a plain number of bytes."""
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 1000, "mb": 10**6, "gb": 10**9}
    lowered = text.strip().lower()
    for suffix, factor in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if lowered.endswith(suffix):
            return int(float(lowered[: -len(suffix)]) * factor)
    return int(lowered)


def machine() -> dict[str, object]:
    """Where the numbers came from."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": socket.gethostname(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def produce(bootstrap: str, args: argparse.Namespace) -> dict[str, float]:
    """Produce until `args.bytes` are acknowledged or `args.seconds` pass."""
    value = os.urandom(args.record_size)
    acked = failed = 0

    def on_delivery(err, _msg) -> None:
        nonlocal acked, failed
        if err is None:
            acked += 1
        else:
            failed += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": args.linger_ms,
            "batch.size": args.batch_size,
            "queue.buffering.max.kbytes": 512 * 1024,
            "compression.type": "none",
        }
    )
    target = args.bytes // args.record_size
    partitions = args.partitions
    sent = 0
    start = time.monotonic()
    deadline = start + args.seconds
    while sent < target and time.monotonic() < deadline:
        try:
            producer.produce(TOPIC, value, partition=sent % partitions, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        if sent % 1000 == 0:
            producer.poll(0)
    producer.flush(120)
    seconds = time.monotonic() - start
    if failed:
        raise RuntimeError(f"{failed} records failed to produce")
    size = acked * args.record_size
    return {"records": acked, "bytes": size, "seconds": seconds, "mb_per_s": size / 1e6 / seconds}


def consume(
    bootstrap: str,
    args: argparse.Namespace,
    records: int,
    topic: str = TOPIC,
    settings: Mapping[str, object] | None = None,
) -> dict[str, float]:
    """Read `records` records back from the beginning of every partition of `topic`
    (`settings`: more consumer properties, e.g. security)."""
    consumer = Consumer(
        {
            **(settings or {}),
            "bootstrap.servers": bootstrap,
            "group.id": "bench-assign-only",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "queued.max.messages.kbytes": 512 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(args.partitions)])
    got = size = 0
    start = time.monotonic()
    deadline = start + max(args.seconds, 60) * 2
    first_batch: tuple[float, int] | None = None  # when the first records came, their bytes
    try:
        while got < records and time.monotonic() < deadline:
            batch = consumer.consume(num_messages=10_000, timeout=0.5)
            for msg in batch:
                err = msg.error()
                if err is not None and err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"consume: {err}")
                if err is None:
                    got += 1
                    size += len(msg.value())
            if first_batch is None and size:
                first_batch = (time.monotonic(), size)
        end = time.monotonic()
    finally:
        consumer.close()
    seconds = end - start
    if got < records or first_batch is None:
        raise RuntimeError(f"consumed {got} of {records} records before the deadline")
    steady = end - first_batch[0]
    rate = size / 1e6 / seconds
    if size > first_batch[1] and steady > 0:  # else everything came in the first records
        rate = (size - first_batch[1]) / 1e6 / steady
    return {
        "records": got,
        "bytes": size,
        "seconds": seconds,
        "mb_per_s": size / 1e6 / seconds,
        # without the start (connect, metadata, offsets, first fetch): after the first records
        "first_records_s": first_batch[0] - start,
        "steady_mb_per_s": rate,
    }


def produce_and_consume(
    args: argparse.Namespace, src: Path | None = None
) -> tuple[dict[str, float], dict[str, float]]:
    """Start a broker (from the source tree `src` when given, else the installed onceflow) on
    a temporary data directory, create the topic, `produce` then `consume`, stop it."""
    previous = os.environ.get("PYTHONPATH")
    if src is not None:
        os.environ["PYTHONPATH"] = str(src)  # the broker's child process imports this tree
    data_dir = Path(tempfile.mkdtemp(prefix="onceflow-bench-"))
    try:
        broker = EmbeddedBroker(data_dir, 30)
    finally:
        if previous is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = previous
    try:
        with AdminClient({"bootstrap.servers": broker.address}) as admin:
            admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].raise_for_error()
        produced = produce(broker.address, args)
        consumed = consume(broker.address, args, int(produced["records"]))
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return produced, consumed


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """The record, topic and producer options `produce` and `consume` read."""
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=parse_size, default=1 << 30, help="default 1GiB")
    parser.add_argument("--seconds", type=float, default=120.0, help="produce time bound")
    add_client_options(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    produced, consumed = produce_and_consume(args)

    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    summary = (
        f"{now} onceflow broker: produce {produced['mb_per_s']:.1f} MB/s "
        f"(target {TARGETS_MB_S['produce']:.0f}), consume {consumed['mb_per_s']:.1f} MB/s "
        f"(target {TARGETS_MB_S['consume']:.0f}); {produced['records']} x {args.record_size} B, "
        f"{args.partitions} partitions, acks=all, fsync on; {machine()['cpu_count']} CPUs"
    )
    run = {
        "date": now,
        "machine": machine(),
        "config": {
            "record_size": args.record_size,
            "partitions": args.partitions,
            "acks": "all",
            "compression": "none",
            "linger_ms": args.linger_ms,
            "batch_size": args.batch_size,
            "bytes_requested": args.bytes,
            "seconds_bound": args.seconds,
            "broker": "default config (fsync on acks=all via group commit), subprocess",
            "client": "confluent-kafka " + __import__("confluent_kafka").version()[0],
        },
        "produce": produced,
        "consume": consumed,
        "targets_mb_per_s": TARGETS_MB_S,
        "targets_met": {
            k: (produced if k == "produce" else consumed)["mb_per_s"] >= v
            for k, v in TARGETS_MB_S.items()
        },
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
