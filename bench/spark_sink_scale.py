"""The exactly-once sink's added latency per micro-batch as the task count grows (issue 19,
item 10): 2, 8 and 32 write tasks, same broker, same `local[2]` session, one run.

    .venv/bin/python bench/spark_sink_scale.py                  # 2, 8, 32 tasks, 2 rounds
    .venv/bin/python bench/spark_sink_scale.py --tasks 2 32 --batches 6 --rounds 1

For each task count a streaming query reads a 1-partition topic of 1 KiB records
(AvailableNow, `--per-batch` records per micro-batch, `minPartitions` = the task count, so each
micro-batch has exactly that many read and write tasks) and writes them to a fresh topic, once
with deliveryGuarantee exactly_once and once with at_least_once (order alternating per round).
The figure is the difference of the medians of Spark's addBatch time per micro-batch: what the
two-phase commit adds to a batch (per task: InitProducerId, the marker read, AddOffsetsToTxn
and TxnOffsetCommit; on the driver: the query marker and one EndTxn per task). The first
micro-batch of each query is left out (it pays the coordinators' first lookups).

With many tasks Spark's own cost per task (hundreds of ms of addBatch per task wave on this
machine) and its noise dwarf that difference, so the bench also measures the sink's protocol
without Spark, against the same broker: a batch's tasks (`twophase.write_task` with the same
rows) one after another, exactly_once vs at_least_once, and the driver's `commit_batch`. The
protocol's added latency per micro-batch is then (exactly_once tasks - at_least_once tasks)
/ 2 task slots + the commit.

Appends the run to bench/results/spark_sink_scale.json and prints a summary; JVM start-up is
not timed.
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

from broker_throughput import append_result, machine
from spark_eos import produce

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.spark.committer import commit_batch
from onceflow.spark.options import parse_sink_options
from onceflow.spark.twophase import TaskInfo, write_task

RESULTS = Path(__file__).parent / "results" / "spark_sink_scale.json"
MODES = ("exactly_once", "at_least_once")
SLOTS = 2  # local[2]


def protocol_batch(bootstrap: str, topic: str, mode: str, tasks: int, rows: int,
                   batch_id: int) -> tuple[float, float]:  # fmt: skip
    """One micro-batch of the sink without Spark: `tasks` tasks of `rows` 1 KiB rows each,
    one after another, then the driver's commit; (tasks ms, commit ms)."""
    import pyarrow as pa

    options = parse_sink_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "deliveryGuarantee": mode}
    )
    data = pa.RecordBatch.from_pydict({"value": [b"x" * 1024] * rows})
    start = time.perf_counter()
    messages = [
        write_task(options, TaskInfo("bench", batch_id, p, 0), f"bench-{topic}", [data])
        for p in range(tasks)
    ]
    written = time.perf_counter()
    commit_batch(options, messages, batch_id)
    return (written - start) * 1000, (time.perf_counter() - written) * 1000


def stream(spark, bootstrap: str, source: str, sink: str, mode: str, per_batch: int,
           tasks: int, checkpoint: Path) -> list[int]:  # fmt: skip
    """One AvailableNow query with `tasks` tasks per micro-batch; addBatch ms per batch."""
    query = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", per_batch)
        .option("minPartitions", tasks)
        .load()
        .selectExpr("key", "value")
        .writeStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(checkpoint))
        .option("deliveryGuarantee", mode)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    return [p["durationMs"].get("addBatch", 0) for p in progress[1:]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--per-batch", type=int, default=640, help="records per micro-batch")
    parser.add_argument("--batches", type=int, default=11, help="micro-batches per query")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="onceflow-bench-sink-scale-"))
    broker = EmbeddedBroker(workdir / "broker", 30)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from onceflow.spark.pipeline import session

    spark = session("local[2]", spark_ui_showConsoleProgress="false")
    add_batch: dict[str, dict[str, list[int]]] = {
        str(t): {mode: [] for mode in MODES} for t in args.tasks
    }
    protocol: dict[str, dict[str, list[float]]] = {
        str(t): {"exactly_once": [], "at_least_once": [], "commit": []} for t in args.tasks
    }
    try:
        bootstrap = broker.address
        outputs = [
            f"out-{t}-{mode}-{r}" for t in args.tasks for mode in MODES for r in range(args.rounds)
        ]
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            created = admin.create_topics(
                [NewTopic("input", 1, 1), NewTopic("warmup", 3, 1)]
                + [NewTopic(name, 3, 1) for name in outputs]
                + [NewTopic(f"protocol-{t}-{mode}", 3, 1) for t in args.tasks for mode in MODES]
            )
            for result in created.values():
                result.raise_for_error()
        produce(bootstrap, "input", args.per_batch * args.batches, partitions=1)
        # warm the JVM, the Python workers and the transaction machinery
        stream(spark, bootstrap, "input", "warmup", "exactly_once", args.per_batch * 4,
               max(args.tasks), workdir / "cp-warmup")  # fmt: skip
        for t in args.tasks:  # the protocol alone; batch 0 warms the coordinators up
            for batch_id in range(args.batches):
                for mode in MODES if batch_id % 2 == 0 else MODES[::-1]:
                    tasks_ms, commit_ms = protocol_batch(
                        bootstrap, f"protocol-{t}-{mode}", mode, t, args.per_batch // t, batch_id
                    )
                    if batch_id:
                        protocol[str(t)][mode].append(tasks_ms)
                        if mode == "exactly_once":
                            protocol[str(t)]["commit"].append(commit_ms)
        for r in range(args.rounds):
            for t in args.tasks:
                for mode in MODES if r % 2 == 0 else MODES[::-1]:
                    name = f"out-{t}-{mode}-{r}"
                    add_batch[str(t)][mode] += stream(
                        spark, bootstrap, "input", name, mode, args.per_batch, t,
                        workdir / f"cp-{name}",
                    )  # fmt: skip
    finally:
        spark.stop()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    medians = {t: {m: statistics.median(v) for m, v in by.items()} for t, by in add_batch.items()}
    added = {t: m["exactly_once"] - m["at_least_once"] for t, m in medians.items()}
    low, high = str(min(args.tasks)), str(max(args.tasks))
    growth = added[high] / added[low] if added[low] > 0 else float("nan")
    protocol_ms = {
        t: {k: statistics.median(v) for k, v in by.items()} for t, by in protocol.items()
    }
    protocol_added = {
        t: (m["exactly_once"] - m["at_least_once"]) / SLOTS + m["commit"]
        for t, m in protocol_ms.items()
    }
    protocol_growth = protocol_added[high] / protocol_added[low]
    summary = (
        f"spark_sink_scale {args.per_batch} records per micro-batch: exactly-once adds "
        + ", ".join(
            f"{added[t]:.0f} ms at {t} tasks ({medians[t]['exactly_once']:.0f} vs "
            f"{medians[t]['at_least_once']:.0f} ms)"
            for t in map(str, args.tasks)
        )
        + f"; {high} tasks / {low} tasks = {growth:.2f}x. Protocol alone, per micro-batch: "
        + ", ".join(
            f"{protocol_added[t]:.0f} ms at {t} tasks (tasks {protocol_ms[t]['exactly_once']:.0f}"
            f" vs {protocol_ms[t]['at_least_once']:.0f} ms serial, commit "
            f"{protocol_ms[t]['commit']:.0f} ms)"
            for t in map(str, args.tasks)
        )
        + f"; {high} / {low} tasks = {protocol_growth:.2f}x"
    )
    run = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "load_average": os.getloadavg(),
        "config": {
            "tasks": args.tasks,
            "per_batch": args.per_batch,
            "batches": args.batches,
            "rounds": args.rounds,
            "value_bytes": 1024,
            "master": "local[2]",
        },
        "add_batch_ms": add_batch,
        "median_add_batch_ms": medians,
        "exactly_once_added_ms": added,
        "growth_high_to_low": growth,
        "protocol_ms": protocol,
        "median_protocol_ms": protocol_ms,
        "protocol_added_ms": protocol_added,
        "protocol_growth_high_to_low": protocol_growth,
        "target": f"{high} tasks <= 2x {low} tasks",
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
