"""Clients kept between tasks in a Python worker (`spark.pools`, issue 23 item 8): per-batch
latency and end-to-end rows/s with `reuseClients` on (the default) and off, in one run.

    .venv/bin/python bench/spark_reuse.py                       # 3 rounds
    .venv/bin/python bench/spark_reuse.py --rounds 1 --records 20000

Two measures, the variants alternating in order every round:

- **The tasks alone, without Spark**, against the same broker: a read task (`read_range` of
  `--task-rows` records of a partition, continuing where the previous one stopped, as in a
  stream) and an exactly-once write task (`write_task`) followed by the driver's commit, each
  repeated `--batches` times in this process (one Python worker). Median ms per task.
- **In Spark** (`local[2]`): a streaming query from the onceflow source to the exactly-once
  sink over a 3-partition topic of 1 KiB records, AvailableNow: with `--small` records per
  micro-batch (a topic of `--small` x (`--small-batches` + 1) records), the median of Spark's
  addBatch and of the whole batch (the per-batch latency, where the fixed cost dominates);
  with `--per-trigger` records per micro-batch over `--records` records, the rows/s from the
  first batch's start to the last one's end. The first micro-batch of each query is left out
  (it starts the Python workers).

Appends the run to bench/results/spark_reuse.json and prints a summary; JVM start-up is not
timed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from broker_throughput import append_result, machine
from spark_eos import produce

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.spark import pools
from onceflow.spark.committer import commit_batch
from onceflow.spark.offsets import OffsetRange
from onceflow.spark.options import parse_sink_options, parse_source_options
from onceflow.spark.source import read_range
from onceflow.spark.twophase import TaskInfo, write_task

RESULTS = Path(__file__).parent / "results" / "spark_reuse.json"
VARIANTS = ("reuse", "no_reuse")


def _flag(variant: str) -> str:
    return "true" if variant == "reuse" else "false"


def tasks_alone(bootstrap: str, variant: str, batches: int, rows: int, r: int) -> dict:
    """Median ms of a read task and of a write task + commit, `batches` of each."""
    import pyarrow as pa

    reuse = _flag(variant)
    source = parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": "input", "reuseClients": reuse},
        batch=False,
    )
    sink = parse_sink_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": f"tasks-{variant}-{r}",
         "reuseClients": _flag(variant)}
    )  # fmt: skip
    data = pa.RecordBatch.from_pydict({"value": [b"x" * 1024] * rows})
    reads, writes = [], []
    for b in range(batches):
        start = time.perf_counter()
        for _batch in read_range(source, OffsetRange("input", 0, b * rows, (b + 1) * rows)):
            pass
        middle = time.perf_counter()
        message = write_task(sink, TaskInfo("bench", b, 0, 0), f"bench-{variant}-{r}", [data])
        commit_batch(sink, [message], b)
        end = time.perf_counter()
        if b:  # the first pays the coordinators' first lookups
            reads.append((middle - start) * 1000)
            writes.append((end - middle) * 1000)
    pools._consumers.clear()
    pools._producers.clear()
    return {"read_task_ms": statistics.median(reads), "write_task_ms": statistics.median(writes)}


def stream(spark, bootstrap: str, source: str, sink: str, variant: str, per_trigger: int,
           checkpoint: Path) -> list[dict]:  # fmt: skip
    """One AvailableNow query; the progress of its micro-batches after the first."""
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_trigger)
        .option("reuseClients", _flag(variant))
        .load()
        .selectExpr("key", "value")
        .writeStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .option("reuseClients", _flag(variant))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return [p for p in query.recentProgress if p["numInputRows"]][1:]


def _rows_per_s(progress: list[dict]) -> float:
    """Rows of the batches over the time from the first one's start to the last one's end."""
    start = datetime.fromisoformat(progress[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    last = progress[-1]
    end = datetime.fromisoformat(last["timestamp"].replace("Z", "+00:00")).timestamp()
    seconds = end - start + last["batchDuration"] / 1000
    return sum(p["numInputRows"] for p in progress) / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=36_000, help="records in the input")
    parser.add_argument("--per-trigger", type=int, default=6000, help="offsets per batch")
    parser.add_argument("--small", type=int, default=300, help="offsets per small batch")
    parser.add_argument("--small-batches", type=int, default=16)
    parser.add_argument("--batches", type=int, default=30, help="tasks alone: repetitions")
    parser.add_argument("--task-rows", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="onceflow-bench-reuse-"))
    broker = EmbeddedBroker(workdir / "broker", 30)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from onceflow.spark.pipeline import session

    spark = session("local[2]", spark_ui_showConsoleProgress="false")
    alone: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    latency: dict[str, dict[str, list[int]]] = {
        v: {"add_batch_ms": [], "batch_ms": []} for v in VARIANTS
    }
    rate: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        bootstrap = broker.address
        names = [f"{kind}-{v}-{r}" for kind in ("tasks", "small", "big", "warm")
                 for v in VARIANTS for r in range(args.rounds)]  # fmt: skip
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            created = admin.create_topics(
                [NewTopic("input", 3, 1), NewTopic("small", 3, 1)]
                + [NewTopic(name, 3, 1) for name in names]
            )
            for result in created.values():
                result.raise_for_error()
        produce(bootstrap, "input", max(args.records, args.batches * args.task_rows * 3))
        produce(bootstrap, "small", args.small * (args.small_batches + 1))
        warm = workdir / "cp-w"
        stream(spark, bootstrap, "input", "warm-reuse-0", "reuse", args.per_trigger, warm)
        for r in range(args.rounds):
            for v in VARIANTS if r % 2 == 0 else VARIANTS[::-1]:
                alone[v].append(tasks_alone(bootstrap, v, args.batches, args.task_rows, r))
                small = stream(spark, bootstrap, "small", f"small-{v}-{r}", v, args.small,
                               workdir / f"cp-s-{v}-{r}")  # fmt: skip
                latency[v]["add_batch_ms"] += [p["durationMs"]["addBatch"] for p in small]
                latency[v]["batch_ms"] += [p["batchDuration"] for p in small]
                big = stream(spark, bootstrap, "input", f"big-{v}-{r}", v, args.per_trigger,
                             workdir / f"cp-b-{v}-{r}")  # fmt: skip
                rate[v].append(_rows_per_s(big))
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    medians = {
        v: {
            "read_task_ms": statistics.median(a["read_task_ms"] for a in alone[v]),
            "write_task_ms": statistics.median(a["write_task_ms"] for a in alone[v]),
            "add_batch_ms": statistics.median(latency[v]["add_batch_ms"]),
            "batch_ms": statistics.median(latency[v]["batch_ms"]),
            "rows_per_s": statistics.median(rate[v]),
        }
        for v in VARIANTS
    }
    on, off = medians["reuse"], medians["no_reuse"]
    summary = (
        f"spark_reuse: read task {off['read_task_ms']:.1f} -> {on['read_task_ms']:.1f} ms, "
        f"write task + commit {off['write_task_ms']:.1f} -> {on['write_task_ms']:.1f} ms; "
        f"{args.small}-offset batches: addBatch {off['add_batch_ms']:.0f} -> "
        f"{on['add_batch_ms']:.0f} ms, batch {off['batch_ms']:.0f} -> {on['batch_ms']:.0f} ms; "
        f"end to end at {args.per_trigger} per batch {off['rows_per_s']:.0f} -> "
        f"{on['rows_per_s']:.0f} rows/s (no reuse -> reuse)"
    )
    run = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "load_average": os.getloadavg(),
        "config": {k: v for k, v in vars(args).items() if k != "out"},
        "tasks_alone": alone,
        "latency": latency,
        "rows_per_s": rate,
        "medians": medians,
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
