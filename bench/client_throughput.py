"""Client throughput: onceflow's Producer and Consumer side by side with confluent-kafka's.

Starts `onceflow broker` as a child process on a temporary data directory (default config:
acks=all appends are fsynced by group commit), creates a topic with 3 partitions per run, and
for `--rounds` rounds, alternating the clients' order to spread machine noise:

- produces `--records` 1 KiB records (acks=all, no compression, partition = i % 3) with
  confluent-kafka and with the onceflow Producer, using the same linger.ms, batch.size and
  max.in.flight.requests.per.connection (idempotence off: the broker does not do
  InitProducerId yet), timing from the first send to the end of flush;
- reads them back from the beginning with confluent-kafka's and onceflow's Consumer (assign).

Appends the run (date, machine, config, per-round and best results, onceflow/confluent ratios)
to bench/results/client_throughput.json and prints one line. Target: onceflow produce >= 0.5x
confluent-kafka.

    .venv/bin/python bench/client_throughput.py
    .venv/bin/python bench/client_throughput.py --records 200000 --rounds 3 --batch-size 16384
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

from broker_throughput import append_result  # noqa: E402
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from onceflow.cli.embedded_broker import EmbeddedBroker  # noqa: E402
from onceflow.client.admin import AdminClient, NewTopic  # noqa: E402
from onceflow.client.consumer import Consumer  # noqa: E402
from onceflow.client.producer import Producer  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "client_throughput.json"
TARGET_PRODUCE_RATIO = 0.5
PARTITIONS = 3


def machine() -> dict[str, object]:
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
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
    }


def result(records: int, record_size: int, seconds: float) -> dict[str, float]:
    size = records * record_size
    return {
        "records": records,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds),
        "mb_per_s": round(size / 1e6 / seconds, 1),
    }


def confluent_produce(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, float]:
    value = os.urandom(args.record_size)
    failed = 0

    def on_delivery(err, _msg) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer = CKProducer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": args.linger_ms,
            "batch.size": args.batch_size,
            "max.in.flight.requests.per.connection": args.max_in_flight,
            "queue.buffering.max.kbytes": 256 * 1024,
            "compression.type": "none",
        }
    )
    start = time.monotonic()
    for i in range(args.records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.005)
        if not i % 1000:
            producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("confluent-kafka did not flush")
    seconds = time.monotonic() - start
    if failed:
        raise RuntimeError(f"confluent-kafka: {failed} records failed")
    return result(args.records, args.record_size, seconds)


def onceflow_produce(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, float]:
    value = os.urandom(args.record_size)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": args.linger_ms,
            "batch.size": args.batch_size,
            "max.in.flight.requests.per.connection": args.max_in_flight,
            "buffer.memory": 256 << 20,
            "max.request.size": max(1 << 20, 4 * args.batch_size),
        }
    )
    try:
        start = time.monotonic()
        futures = [
            producer.send(topic, value, partition=i % PARTITIONS) for i in range(args.records)
        ]
        producer.flush(300)
        seconds = time.monotonic() - start
        failed = sum(1 for f in futures if f.exception(0) is not None)
    finally:
        producer.close()
    if failed:
        raise RuntimeError(f"onceflow: {failed} records failed")
    return result(args.records, args.record_size, seconds)


def confluent_consume(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, float]:
    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-assign-only",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 1 << 20,
        }
    )
    consumer.assign([CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    start = time.monotonic()
    try:
        while got < args.records and time.monotonic() - start < 300:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is None:
                    got += 1
    finally:
        consumer.close()
    seconds = time.monotonic() - start
    if got < args.records:
        raise RuntimeError(f"confluent-kafka consumed {got} of {args.records}")
    return result(got, args.record_size, seconds)


def onceflow_consume(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, float]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 50 << 20,
            "max.partition.fetch.bytes": 1 << 20,
            "max.poll.records": 10_000,
        }
    )
    consumer.assign([(topic, p) for p in range(PARTITIONS)])
    got = 0
    start = time.monotonic()
    try:
        while got < args.records and time.monotonic() - start < 300:
            got += len(consumer.poll(0.5))
    finally:
        consumer.close()
    seconds = time.monotonic() - start
    if got < args.records:
        raise RuntimeError(f"onceflow consumed {got} of {args.records}")
    return result(got, args.record_size, seconds)


CLIENTS = {
    "confluent": (confluent_produce, confluent_consume),
    "onceflow": (onceflow_produce, onceflow_consume),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--max-in-flight", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="onceflow-client-bench-"))
    broker = EmbeddedBroker(tmp / "broker", 30)
    rounds = []
    try:
        for round_no in range(args.rounds):
            order = ["confluent", "onceflow"] if round_no % 2 == 0 else ["onceflow", "confluent"]
            measured: dict[str, dict[str, dict[str, float]]] = {}
            for client in order:
                topic = f"bench-{client}-{round_no}"
                with AdminClient({"bootstrap.servers": broker.address}) as admin:
                    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].raise_for_error()
                produce, consume = CLIENTS[client]
                measured[client] = {
                    "produce": produce(broker.address, topic, args),
                    "consume": consume(broker.address, topic, args),
                }
            rounds.append(measured)
    finally:
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    best = {
        client: {
            phase: max((r[client][phase] for r in rounds), key=lambda x: x["records_per_s"])
            for phase in ("produce", "consume")
        }
        for client in CLIENTS
    }
    ratios = {
        phase: round(
            best["onceflow"][phase]["records_per_s"] / best["confluent"][phase]["records_per_s"], 2
        )
        for phase in ("produce", "consume")
    }
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    summary = (
        f"{now} produce: onceflow {best['onceflow']['produce']['mb_per_s']} MB/s vs confluent "
        f"{best['confluent']['produce']['mb_per_s']} MB/s (x{ratios['produce']}, target "
        f"x{TARGET_PRODUCE_RATIO}); consume: onceflow {best['onceflow']['consume']['mb_per_s']} "
        f"MB/s vs confluent {best['confluent']['consume']['mb_per_s']} MB/s "
        f"(x{ratios['consume']}); "
        f"{args.records} x {args.record_size} B, batch.size {args.batch_size}, "
        f"linger.ms {args.linger_ms}, best of {args.rounds}"
    )
    run = {
        "date": now,
        "machine": machine(),
        "config": {
            "records": args.records,
            "record_size": args.record_size,
            "partitions": PARTITIONS,
            "acks": "all",
            "compression": "none",
            "linger_ms": args.linger_ms,
            "batch_size": args.batch_size,
            "max_in_flight": args.max_in_flight,
            "idempotence": False,
            "rounds": args.rounds,
            "confluent_kafka": __import__("confluent_kafka").version()[0],
        },
        "rounds": rounds,
        "best": best,
        "ratio_onceflow_to_confluent": ratios,
        "target_produce_ratio": TARGET_PRODUCE_RATIO,
        "target_met": ratios["produce"] >= TARGET_PRODUCE_RATIO,
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
