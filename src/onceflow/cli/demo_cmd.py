"""`onceflow demo`: a real Kafka client round trip through an embedded onceflow broker.

Starts `onceflow broker` as a child process on a free port over a temporary data directory,
creates a 3-partition topic with onceflow's AdminClient, produces numbered records with
confluent-kafka (librdkafka, acks=all), reads them back with a confluent-kafka consumer using
assign() (no consumer group), checks that every record came back exactly once, byte for byte,
in per-partition order at consecutive offsets, prints a short summary and exits 0. Any failure
prints one line to stderr and exits 1.
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.connection import KafkaConnectionError, KafkaError, KafkaTimeoutError

READY_PREFIX = "onceflow broker ready on "
TOPIC = "onceflow-demo"


class DemoError(Exception):
    """A step of the demo failed; the message is the one line printed."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `demo` sub-command."""
    parser = subparsers.add_parser(
        "demo",
        help="round-trip records through an embedded broker with a real Kafka client",
        description="Start an embedded broker, produce and consume with confluent-kafka, "
        "verify exactly-once delivery and print a summary.",
    )
    parser.add_argument("--records", type=int, default=10_000, help="records to send")
    parser.add_argument("--record-size", type=int, default=1024, help="value size in bytes")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--data-dir", help="keep the broker's data here (default: a temp dir)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for each phase")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of `onceflow demo`; returns the exit code."""
    if args.records < 1 or args.record_size < 16 or args.partitions < 1:
        print(
            "onceflow demo: need --records >= 1, --record-size >= 16, --partitions >= 1",
            file=sys.stderr,
        )
        return 2
    temp = None if args.data_dir else tempfile.mkdtemp(prefix="onceflow-demo-")
    data_dir = Path(args.data_dir or temp)
    broker = None
    try:
        broker = EmbeddedBroker(data_dir, args.timeout)
        summary = run_round_trip(broker.address, args)
        print(summary)
        return 0
    except DemoError as exc:
        print(f"onceflow demo: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"onceflow demo: {exc}", file=sys.stderr)
        return 1
    finally:
        if broker is not None:
            broker.stop()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


class EmbeddedBroker:
    """`onceflow broker` as a child process on 127.0.0.1 and a free port."""

    def __init__(self, data_dir: Path, timeout: float):
        data_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = data_dir / "broker.stderr.log"
        cmd = [
            sys.executable,
            "-m",
            "onceflow",
            "broker",
            "--data-dir",
            str(data_dir / "data"),
            "--listen",
            "127.0.0.1:0",
            "--log-level",
            "WARNING",
        ]
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.address = self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DemoError(
                        f"the broker did not start within {timeout:.0f}s{self._stderr_tail()}"
                    )
                if not selector.select(remaining):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    raise DemoError(
                        f"the broker exited with status {self.proc.wait()}{self._stderr_tail()}"
                    )
                buffer += chunk
        line = buffer.split(b"\n", 1)[0].decode(errors="replace")
        if not line.startswith(READY_PREFIX):
            raise DemoError(f"unexpected broker output {line!r}")
        return line[len(READY_PREFIX) :].strip()

    def _stderr_tail(self) -> str:
        try:
            lines = self.stderr_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1]}" if lines else ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _value(seq: int, size: int) -> bytes:
    head = b"%010d|" % seq
    body = (b"onceflow demo record %d " % seq) * (size // 20 + 1)
    return head + body[: size - len(head)]


def run_round_trip(bootstrap: str, args: argparse.Namespace) -> str:
    """Create the topic, produce, consume, verify; returns the summary text."""
    try:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
        from confluent_kafka import KafkaError as RdKafkaError
    except ImportError as exc:
        raise DemoError("the demo needs confluent-kafka (pip install confluent-kafka)") from exc

    n, size, partitions = args.records, args.record_size, args.partitions
    try:
        with AdminClient({"bootstrap.servers": bootstrap, "client.id": "onceflow-demo"}) as admin:
            result = admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC]
    except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as exc:
        raise DemoError(f"cannot create topic {TOPIC!r}: {exc}") from exc
    if not result.ok:
        raise DemoError(f"cannot create topic {TOPIC!r}: {result.error_code.name}")

    # produce
    failures: list[str] = []
    acked = 0

    def on_delivery(err, _msg) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        elif len(failures) < 3:
            failures.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": int(args.timeout * 1000),
        }
    )
    start = time.monotonic()
    for seq in range(n):
        while True:
            try:
                producer.produce(
                    TOPIC, _value(seq, size), partition=seq % partitions, on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(args.timeout)
    produce_s = time.monotonic() - start
    if left or failures or acked != n:
        raise DemoError(f"produce: {acked} of {n} acknowledged; {left} unsent; {failures}")

    # consume
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "onceflow-demo",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    total = 0
    start = time.monotonic()
    deadline = start + args.timeout
    try:
        while total < n and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None and msg.error().code() != RdKafkaError._PARTITION_EOF:
                    raise DemoError(f"consume: {msg.error()}")
                if msg.error() is None:
                    seen[msg.partition()].append((msg.offset(), msg.value()))
                    total += 1
    finally:
        consumer.close()
    consume_s = time.monotonic() - start

    problems = verify(seen, n, size, partitions)
    if problems:
        raise DemoError("exactly-once check failed: " + "; ".join(problems[:3]))
    mb = n * size / 1e6
    return (
        f"onceflow demo: {n} records of {size} B over {partitions} partitions "
        f"({mb:.1f} MB) via {bootstrap}\n"
        f"  produce (confluent-kafka, acks=all): {produce_s:.2f} s, {mb / produce_s:.1f} MB/s\n"
        f"  consume (confluent-kafka, assign):   {consume_s:.2f} s, {mb / consume_s:.1f} MB/s\n"
        f"  exactly-once check passed: every record once, in order, at consecutive offsets"
    )


def verify(
    seen: dict[int, list[tuple[int, bytes]]], n: int, size: int, partitions: int
) -> list[str]:
    """Problems with what was consumed; empty when each record came back exactly once."""
    problems = []
    for partition, got in seen.items():
        want = range(partition, n, partitions)
        if [o for o, _ in got] != list(range(len(got))):
            problems.append(f"partition {partition}: offsets not consecutive from 0")
        if len(got) != len(want):
            problems.append(f"partition {partition}: {len(got)} records, expected {len(want)}")
            continue
        for (offset, value), seq in zip(got, want, strict=True):
            if value != _value(seq, size):
                problems.append(f"partition {partition} offset {offset}: wrong record")
                break
    return problems
