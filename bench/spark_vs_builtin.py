"""onceflow's Spark connector next to Spark's built-in Kafka connector (spark-sql-kafka-0-10,
fetched by scripts/fetch_kafka.sh), same session settings (local[2]), same broker, one run.

    .venv/bin/python bench/spark_vs_builtin.py                   # 300k records, 2 rounds
    .venv/bin/python bench/spark_vs_builtin.py --records 20000 --rounds 1 --per-trigger 2000

Measures, alternating the order of the two connectors each round:

- source: a batch read of a 3-partition topic of `--records` 1 KiB records into the `noop`
  sink, `format("onceflow")` vs `format("kafka")` (both read_committed): rows/s;
- end to end, for each `--per-trigger` size: a streaming query (AvailableNow,
  maxOffsetsPerTrigger) reading the topic, projecting key and value, and writing them to a
  fresh output topic: onceflow source + exactly-once onceflow sink vs Spark's Kafka source +
  Spark's Kafka sink (at least once): rows/s and the median addBatch time per micro-batch.

The broker is onceflow's (`EmbeddedBroker`) unless `--bootstrap` names another cluster (for
example a local Apache Kafka). Appends the run to bench/results/spark_vs_builtin.json and
prints a summary; JVM start-up is not timed.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))  # support.kafka_cluster.spark_kafka_jars
from broker_throughput import append_result, machine  # noqa: E402
from process_cpu import cpu_by_role, cpu_delta  # noqa: E402
from spark_eos import PARTITIONS, produce, spark_read, spark_stream  # noqa: E402
from support.kafka_cluster import spark_kafka_jars  # noqa: E402

from onceflow.cli.embedded_broker import EmbeddedBroker  # noqa: E402
from onceflow.client.admin import AdminClient, NewTopic  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "spark_vs_builtin.json"
CONNECTORS = ("onceflow", "kafka")


def copy_stream(spark, connector: str, bootstrap: str, topics: tuple[str, str], per_trigger: int,
                checkpoint: Path) -> dict:  # fmt: skip
    """An AvailableNow copy of topics[0] to topics[1] with `connector` at both ends (ours
    exactly once, Spark's at least once)."""
    guarantee = "exactly_once" if connector == "onceflow" else None
    durations: dict[str, list[int]] = {}
    before = cpu_by_role()
    seconds, rows, add_batch = spark_stream(
        spark, bootstrap, *topics, guarantee, per_trigger, checkpoint, connector, durations
    )
    cpu = cpu_delta(before, cpu_by_role())
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_s": rows / seconds,
        "batches": len(add_batch),
        "median_add_batch_ms": statistics.median(add_batch) if add_batch else 0,
        # where a batch's time goes: Spark's phases (addBatch = the tasks and the sink's
        # commit; latestOffset, queryPlanning, walCommit, commitOffsets around it)
        "median_phase_ms": {k: statistics.median(v) for k, v in durations.items()},
        # CPU seconds by process (the broker, Spark's JVM, the Python workers where the
        # connectors run, the driver), and the whole run's CPU per 100k rows
        "cpu_s": cpu,
        "cpu_s_per_100k_rows": {k: round(v * 100_000 / max(rows, 1), 2) for k, v in cpu.items()},
    }


def create(bootstrap: str, *names: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for name in names:
            admin.create_topics([NewTopic(name, PARTITIONS, -1)])[name].raise_for_error()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--per-trigger", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--bootstrap", help="an existing cluster instead of an embedded broker")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import onceflow.spark

    workdir = Path(tempfile.mkdtemp(prefix="onceflow-bench-spark-builtin-"))
    broker = None if args.bootstrap else EmbeddedBroker(workdir / "broker", 30)
    bootstrap = args.bootstrap or broker.address
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(spark_kafka_jars()))
        .getOrCreate()
    )
    onceflow.spark.register(spark)
    tag = str(int(time.time()))
    source = f"builtin-bench-in-{tag}"
    read: dict[str, list[float]] = {c: [] for c in CONNECTORS}
    stream: dict[str, dict[str, list[dict]]] = {
        str(n): {c: [] for c in CONNECTORS} for n in args.per_trigger
    }
    try:
        create(bootstrap, source)
        produce(bootstrap, source, args.records)
        spark_read(spark, bootstrap, source, "onceflow")  # warm both connectors' code paths
        spark_read(spark, bootstrap, source, "kafka")
        for n in range(args.rounds):
            order = CONNECTORS if n % 2 == 0 else CONNECTORS[::-1]
            for connector in order:
                read[connector].append(
                    args.records / spark_read(spark, bootstrap, source, connector)
                )
            for size in args.per_trigger:
                for connector in order:
                    sink = f"builtin-bench-out-{tag}-{connector}-{size}-{n}"
                    create(bootstrap, sink)
                    checkpoint = workdir / f"cp-{connector}-{size}-{n}"
                    result = copy_stream(spark, connector, bootstrap, (source, sink), size,
                                         checkpoint)  # fmt: skip
                    stream[str(size)][connector].append(result)
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    read_median = {c: statistics.median(v) for c, v in read.items()}
    stream_median = {
        size: {c: statistics.median(r["rows_per_s"] for r in runs) for c, runs in by_c.items()}
        for size, by_c in stream.items()
    }
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    parts = [
        f"source {read_median['onceflow']:.0f} vs {read_median['kafka']:.0f} rows/s "
        f"({read_median['onceflow'] / read_median['kafka']:.2f}x)"
    ] + [
        f"end to end at {size}/trigger {m['onceflow']:.0f} (exactly once) vs {m['kafka']:.0f} "
        f"(at least once) rows/s ({m['onceflow'] / m['kafka']:.2f}x)"
        for size, m in stream_median.items()
    ]
    summary = f"{now} onceflow vs Spark's kafka format, {args.records} x 1 KiB: " + "; ".join(parts)
    append_result(
        args.out,
        {
            "date": now,
            "machine": machine(),
            "config": {
                "records": args.records,
                "record_size": 1024,
                "partitions": PARTITIONS,
                "rounds": args.rounds,
                "per_trigger": args.per_trigger,
                "master": "local[2]",
                "broker": args.bootstrap or "embedded onceflow broker",
                "spark_kafka_jars": [Path(j).name for j in spark_kafka_jars()],
            },
            "read_rows_per_s": read,
            "stream": stream,
            "median": {"read_rows_per_s": read_median, "stream_rows_per_s": stream_median},
            "summary": summary,
        },
    )
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
