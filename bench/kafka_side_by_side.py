"""onceflow's broker next to Apache Kafka on this machine: the same client, the same load.

confluent-kafka produces 1 KiB records over 3 partitions with acks=all for `--seconds` per run,
plain (no idempotence), idempotent and transactional (a commit every `--commit-ms`), then
reads the transactional topic back with read_uncommitted and read_committed. Three targets,
each run in every round, their order rotating from round to round:

- `onceflow`: onceflow's broker, default configuration (acks=all answered after fsync);
- `kafka`: a 1-node Apache Kafka (tests/support/kafka_cluster.py, the version pinned in
  scripts/kafka/pom.xml) with its defaults: acks=all answered once the in-sync replicas
  (here the leader alone) have the batch, before any fsync;
- `kafka-fsync`: the same Kafka node, topics with `flush.messages=1`: every append is fsynced
  before it is acknowledged, as onceflow does.

Appends the run to bench/results/kafka_side_by_side.json (medians and ratios to Kafka) and
prints one line.

    .venv/bin/python bench/kafka_side_by_side.py                   # 3 rounds of 8 s runs
    .venv/bin/python bench/kafka_side_by_side.py --rounds 1 --seconds 2
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))  # support.kafka_cluster: Kafka's own classes, started
from broker_throughput import append_result, machine, ratio  # noqa: E402
from support.kafka_cluster import KafkaCluster, kafka_version  # noqa: E402
from transactions_cost import (  # noqa: E402
    add_load_arguments,
    consume,
    produce_idempotent,
    produce_transactional,
)

from onceflow.cli.embedded_broker import EmbeddedBroker  # noqa: E402
from onceflow.client.admin import AdminClient, NewTopic  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "kafka_side_by_side.json"
TARGETS = ("onceflow", "kafka", "kafka-fsync")
MEASURES = ("plain", "idempotent", "transactional", "read_uncommitted", "read_committed")


def topics(target: str) -> dict[str, str]:
    """The topic of each produce measure on `target` (the two Kafka targets share a node)."""
    prefix = "fsync-" if target == "kafka-fsync" else ""
    return {m: f"{prefix}{m}" for m in ("plain", "idempotent", "transactional")}


def create_topics(bootstrap: str, target: str, partitions: int) -> None:
    config = {"flush.messages": "1"} if target == "kafka-fsync" else {}
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for name in topics(target).values():
            admin.create_topics([NewTopic(name, partitions, 1, config)])[name].raise_for_error()


def produce_round(bootstrap: str, target: str, args: argparse.Namespace, value: bytes, n: int):
    """One plain, one idempotent and one transactional produce run against `target`."""
    names = topics(target)
    return {
        "plain": produce_idempotent(bootstrap, args, value, names["plain"], idempotence=False),
        "idempotent": produce_idempotent(bootstrap, args, value, names["idempotent"]),
        "transactional": produce_transactional(
            bootstrap, args, value, f"bench-{target}-{n}", names["transactional"]
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_arguments(parser)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    value = os.urandom(args.record_size)
    workdir = Path(tempfile.mkdtemp(prefix="onceflow-bench-kafka-"))
    onceflow = EmbeddedBroker(workdir / "onceflow", 30)
    kafka = KafkaCluster(workdir / "kafka", 1, transaction_version=2).start()
    bootstrap = {"onceflow": onceflow.address, "kafka": kafka.bootstrap}
    bootstrap["kafka-fsync"] = kafka.bootstrap
    runs: dict[str, dict[str, list[dict]]] = {t: {m: [] for m in MEASURES} for t in TARGETS}
    try:
        for target in TARGETS:
            create_topics(bootstrap[target], target, args.partitions)
        for n in range(args.rounds):
            order = TARGETS[n % 3 :] + TARGETS[: n % 3]
            for target in order:
                for measure, result in produce_round(
                    bootstrap[target], target, args, value, n
                ).items():
                    runs[target][measure].append(result)
        for n in range(args.rounds):
            order = TARGETS[n % 3 :] + TARGETS[: n % 3]
            for target in order:
                txn_topic = topics(target)["transactional"]
                total = sum(r["records"] for r in runs[target]["transactional"])
                for isolation in ("read_uncommitted", "read_committed"):
                    result = consume(bootstrap[target], args, isolation, total, txn_topic)
                    runs[target][isolation].append(result)
    finally:
        onceflow.stop()
        kafka.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    median = {
        t: {m: statistics.median(r["mb_per_s"] for r in runs[t][m]) for m in MEASURES}
        for t in TARGETS
    }
    ratios = {
        f"onceflow/{other}": {m: ratio(median["onceflow"][m], median[other][m]) for m in MEASURES}
        for other in ("kafka", "kafka-fsync")
    }
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    parts = [
        f"{m} {median['onceflow'][m]:.0f}/{median['kafka'][m]:.0f}/{median['kafka-fsync'][m]:.0f}"
        for m in MEASURES
    ]
    summary = (
        f"{now} MB/s onceflow/kafka/kafka-fsync (Kafka {kafka_version()}, 1 node, "
        f"confluent-kafka, {args.record_size} B records, {args.partitions} partitions, acks=all, "
        f"medians of {args.rounds}): " + "; ".join(parts)
    )
    append_result(
        args.out,
        {
            "date": now,
            "machine": machine(),
            "config": {
                "kafka_version": kafka_version(),
                "record_size": args.record_size,
                "partitions": args.partitions,
                "acks": "all",
                "linger_ms": args.linger_ms,
                "batch_size": args.batch_size,
                "queue_kbytes": args.queue_kbytes,
                "commit_ms": args.commit_ms,
                "seconds_per_produce_run": args.seconds,
                "rounds": args.rounds,
                "client": "confluent-kafka " + __import__("confluent_kafka").version()[0],
            },
            "runs": runs,
            "median_mb_per_s": median,
            "ratios": ratios,
            "summary": summary,
        },
    )
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
