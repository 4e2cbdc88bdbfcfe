"""Spark connector throughput, side by side in one run (1 KiB records, local[2], broker here).

    .venv/bin/python bench/spark_eos.py                 # 100k records, 2 rounds
    .venv/bin/python bench/spark_eos.py --records 200000 --rounds 3

Measures, alternating the order of the variants each round:

- source: `spark.read.format("onceflow")` of a 3-partition topic (`--source-records`, 300k by
  default: every Spark query pays ~0.3 s of planning -- Python data source workers, task
  launch -- before its first row, which a 3000-record read measures and the summary reports)
  into the `noop` sink, vs the onceflow Consumer reading the same records (read_committed,
  assign) -> ratio (target >= 0.7);
- sink: `spark.range` with a 1 KiB value column written with `format("onceflow")` (batch, Arrow
  writer, exactly_once), vs the onceflow Producer's idempotent throughput on the same records
  -> ratio (target >= 0.7);
- end to end: a streaming query, onceflow source -> projection -> onceflow sink, AvailableNow
  with maxOffsetsPerTrigger, with deliveryGuarantee exactly_once and at_least_once: rows/s,
  MB/s, the ratio (target: exactly_once <= 10% slower) and the median time Spark spends in
  addBatch per micro-batch in each mode;
- latency: the same streaming query with small micro-batches (`--latency-records` per trigger,
  100 per partition by default, 30 batches per mode and round), where addBatch is mostly the
  fixed cost of a batch rather than moving 10 MB: the difference of the medians is the latency
  exactly-once adds per micro-batch (target <= 50 ms). With 10k-record batches the same
  difference drowns in the throughput noise of the batch (it swung from -6 to +74 ms between
  runs) and is reported for reference only.

Appends the run to bench/results/spark_eos.json and prints a summary. JVM start-up is
excluded: only the actions and the queries are timed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from broker_throughput import append_result  # noqa: E402

from onceflow.cli.embedded_broker import EmbeddedBroker  # noqa: E402
from onceflow.client.admin import AdminClient, NewTopic  # noqa: E402
from onceflow.client.consumer import Consumer  # noqa: E402
from onceflow.client.producer import Producer  # noqa: E402
from onceflow.spark.orders import end_offsets  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "spark_eos.json"
PARTITIONS = 3
VALUE = 1024
TINY = 3000  # records of the query that measures Spark's fixed cost per read
LATENCY_BATCHES = 30  # micro-batches per latency query


def produce(bootstrap: str, topic: str, n: int, partitions: int = PARTITIONS) -> float:
    """The onceflow Producer (idempotent, the default) sending n 1 KiB values, round robin over
    `partitions`; seconds."""
    value = b"x" * VALUE
    start = time.perf_counter()
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for i in range(n):
            producer.send(topic, value, partition=i % partitions)
        producer.flush(120)
    return time.perf_counter() - start


def consume(bootstrap: str, topic: str, n: int) -> float:
    """The onceflow Consumer reading n records (read_committed); seconds."""
    start = time.perf_counter()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "max.poll.records": 4096,
        }
    )
    got = 0
    try:
        consumer.assign([(topic, p, 0) for p in range(PARTITIONS)])
        while got < n:
            got += len(consumer.poll(1.0))
    finally:
        consumer.close()
    return time.perf_counter() - start


def spark_read(spark, bootstrap: str, topic: str, connector: str = "onceflow") -> float:
    """Seconds for a batch read of `topic` (read_committed) into `noop` through `connector`."""
    start = time.perf_counter()
    (
        spark.read.format(connector)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", topic)
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.perf_counter() - start


def spark_write(spark, bootstrap: str, topic: str, n: int) -> float:
    from pyspark.sql import functions as F

    value = F.lit(bytearray(b"x" * VALUE)).alias("value")  # a literal: no per-row JVM work
    df = spark.range(0, n, 1, PARTITIONS).select(value)
    start = time.perf_counter()
    df.write.format("onceflow").mode("append").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", topic
    ).save()
    return time.perf_counter() - start


def spark_stream(
    spark,
    bootstrap: str,
    source: str,
    sink: str,
    guarantee: str | None,
    per_trigger: int,
    cp: Path,
    connector: str = "onceflow",
    durations: dict[str, list[int]] | None = None,
) -> tuple[float, int, list[int]]:
    """AvailableNow stream source -> sink through `connector` ("onceflow", or Spark's own
    "kafka" with `guarantee` None); (seconds, rows, addBatch ms of each batch). `durations`,
    when given, collects every phase of Spark's progress report (durationMs) per batch."""
    writer = (
        spark.readStream.format(connector)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_trigger)
        .load()
        .selectExpr("key", "value")
        .writeStream.format(connector)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
    )
    if guarantee is not None:
        writer = writer.option("deliveryGuarantee", guarantee)
    start = time.perf_counter()
    running = writer.start()
    running.awaitTermination()
    seconds = time.perf_counter() - start
    progress = running.recentProgress
    rows = sum(p["numInputRows"] for p in progress)
    add_batch = [p["durationMs"].get("addBatch", 0) for p in progress if p["numInputRows"]]
    if durations is not None:
        for p in progress:
            if p["numInputRows"]:
                for phase, ms in p["durationMs"].items():
                    durations.setdefault(phase, []).append(ms)
    return seconds, rows, add_batch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument(
        "--source-records",
        type=int,
        default=300_000,
        help="records of the source comparison (a Spark query costs ~0.3 s before its first "
        "row, so small reads measure that; default 300000)",
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--latency-records",
        type=int,
        default=300,
        help="records per micro-batch of the latency queries (default 300, 30 batches each)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    n = args.records
    mb = n * VALUE / 1e6
    workdir = Path(tempfile.mkdtemp(prefix="onceflow-bench-spark-"))
    broker = EmbeddedBroker(workdir / "broker", 30)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from onceflow.spark.pipeline import session

    spark = session("local[2]")
    rates: dict[str, list[float]] = {}
    sn = args.source_records
    query_s: list[float] = []  # a whole query of TINY records: Spark's fixed cost per read
    add_batch: dict[str, list[int]] = {"exactly_once": [], "at_least_once": []}
    small_batch: dict[str, list[int]] = {"exactly_once": [], "at_least_once": []}
    per_small = args.latency_records

    def record(name: str, seconds: float, rows: int = n) -> None:
        rates.setdefault(name, []).append(rows / seconds)

    try:
        bootstrap = broker.address
        topics = ["input", "source-input", "tiny", "warmup", "small"] + [
            f"{kind}-{r}"
            for r in range(args.rounds)
            for kind in ("produced", "written", "eos", "alo", "eos-small", "alo-small")
        ]
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            for result in admin.create_topics(
                [NewTopic(t, PARTITIONS, 1) for t in topics]
            ).values():
                result.raise_for_error()
        produce(bootstrap, "input", n)
        produce(bootstrap, "source-input", args.source_records)
        produce(bootstrap, "tiny", TINY)
        produce(bootstrap, "small", per_small * LATENCY_BATCHES)
        spark_read(spark, bootstrap, "input")  # warm the JVM and the Python workers
        # and the transaction machinery: the first transactional use creates the broker's
        # internal topics (once per cluster, not a per-batch cost)
        spark_write(spark, bootstrap, "warmup", 1000)
        spark_stream(spark, bootstrap, "warmup", "warmup", "at_least_once", 500, workdir / "cpw")
        for r in range(args.rounds):
            flip = r % 2 == 1
            for step in ["consumer", "source"] if not flip else ["source", "consumer"]:
                if step == "consumer":
                    record("consumer", consume(bootstrap, "source-input", sn), sn)
                else:
                    record("source", spark_read(spark, bootstrap, "source-input"), sn)
                    query_s.append(spark_read(spark, bootstrap, "tiny"))
            for step in ["producer", "sink"] if not flip else ["sink", "producer"]:
                if step == "producer":
                    record("producer", produce(bootstrap, f"produced-{r}", n))
                else:
                    record("sink", spark_write(spark, bootstrap, f"written-{r}", n))
            modes = ["exactly_once", "at_least_once"]
            for mode in modes if not flip else modes[::-1]:
                topic = f"{'eos' if mode == 'exactly_once' else 'alo'}-{r}"
                seconds, rows, batches = spark_stream(
                    spark, bootstrap, "input", topic, mode, n // 10, workdir / f"cp-{topic}"
                )
                record(mode, seconds, rows)
                add_batch[mode].extend(batches)
                written = sum(end_offsets(bootstrap, topic, PARTITIONS, True))
                if mode == "exactly_once" and written < n:
                    raise RuntimeError(f"exactly_once wrote {written} offsets for {n} rows")
            for mode in modes if flip else modes[::-1]:
                topic = f"{'eos' if mode == 'exactly_once' else 'alo'}-small-{r}"
                _, _, batches = spark_stream(
                    spark, bootstrap, "small", topic, mode, per_small, workdir / f"cp-{topic}"
                )
                small_batch[mode].extend(batches)
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in rates.items()}
    large_ms = {k: statistics.median(v) for k, v in add_batch.items()}
    small_ms = {k: statistics.median(v) for k, v in small_batch.items()}
    added_ms = small_ms["exactly_once"] - small_ms["at_least_once"]
    added_large_ms = large_ms["exactly_once"] - large_ms["at_least_once"]
    ratios = {
        "source_to_consumer": med["source"] / med["consumer"],
        "sink_to_producer": med["sink"] / med["producer"],
        "exactly_once_to_at_least_once": med["exactly_once"] / med["at_least_once"],
    }
    fixed_s = statistics.median(query_s)
    summary = (
        f"spark_eos {n} x 1 KiB: source ({sn} records) {med['source']:,.0f} rows/s = "
        f"{ratios['source_to_consumer']:.2f}x consumer ({med['consumer']:,.0f}), a {TINY}-record "
        f"read takes {fixed_s:.2f} s; sink "
        f"{med['sink']:,.0f} rows/s = {ratios['sink_to_producer']:.2f}x producer "
        f"({med['producer']:,.0f}); end to end exactly_once {med['exactly_once']:,.0f} rows/s "
        f"({med['exactly_once'] * VALUE / 1e6:.0f} MB/s) = "
        f"{ratios['exactly_once_to_at_least_once']:.2f}x at_least_once "
        f"({med['at_least_once']:,.0f}); exactly-once adds {added_ms:.0f} ms per micro-batch "
        f"(median addBatch of {per_small}-record batches {small_ms['exactly_once']:.0f} vs "
        f"{small_ms['at_least_once']:.0f} ms; of {n // 10}-record batches "
        f"{large_ms['exactly_once']:.0f} vs {large_ms['at_least_once']:.0f} ms, "
        f"{added_large_ms:+.0f} ms)"
    )
    run = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average": os.getloadavg(),
        "config": {
            "records": n,
            "source_records": sn,
            "value_bytes": VALUE,
            "rounds": args.rounds,
            "mb": mb,
            "master": "local[2]",
            "max_offsets_per_trigger": n // 10,
            "latency_records_per_trigger": per_small,
        },  # fmt: skip
        "rows_per_s": rates,
        "median_rows_per_s": med,
        "add_batch_ms": add_batch,
        "small_add_batch_ms": small_batch,
        "exactly_once_added_ms_per_batch": added_ms,
        "exactly_once_added_ms_per_large_batch": added_large_ms,
        "tiny_read_seconds": query_s,
        "ratios": ratios,
        "targets": {
            "source_to_consumer": ">= 0.7",
            "sink_to_producer": ">= 0.7",
            "exactly_once_to_at_least_once": ">= 0.9",
            "added_ms": "<= 50",
        },  # fmt: skip
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
