"""The consume-transform-produce job of `onceflow demo`: orders in, validated orders out.

Each input record is an order, key `order-<id>`, value JSON
`{"id": 7, "customer": "c3", "amount_cents": 1250, "quantity": 2}`. The job validates it
(a positive amount and quantity) and enriches it with the total; every input order gives
exactly one output record, key unchanged, value JSON
`{"id": 7, "customer": "c3", "total_cents": 2500, "status": "accepted"}` (or `"rejected"` with
the reason); `onceflow.spark.orders` makes the input and checks the output. It is one
Structured Streaming query: the `onceflow` source (read_committed,
offsets in the checkpoint) -> Spark SQL -> the `onceflow` sink (exactly_once). With `--batch`
it is one batch job instead (`--job-id` names it, for re-runs).

Run as a driver process: `python -m onceflow.spark.pipeline --bootstrap HOST:PORT --input
orders --output orders-validated --checkpoint DIR`. With Trigger.AvailableNow (the default)
it processes everything committed when it starts and exits 0; started again from the same
checkpoint after a crash, it goes on where the checkpoint says. With `--remote sc://HOST:PORT`
the job runs on a Spark Connect server instead of in a Spark driver of its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

__all__ = ["build_query", "main", "remote_session", "session"]

ORDER_SCHEMA = "id long, customer string, amount_cents long, quantity int"
SUMMARY_PREFIX = "onceflow pipeline finished:"  # last line of a run that processed everything


def validate_orders(orders: Any) -> Any:
    """The transform: `orders` has the source's columns; the result, `key` and `value` columns
    for the sink."""
    from pyspark.sql import functions as F

    orders = orders.select(
        "key", F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o")
    )
    valid = (F.col("o.amount_cents") > 0) & (F.col("o.quantity") > 0)
    accepted = F.to_json(
        F.struct(
            F.col("o.id").alias("id"),
            F.col("o.customer").alias("customer"),
            (F.col("o.amount_cents") * F.col("o.quantity")).alias("total_cents"),
            F.lit("accepted").alias("status"),
        )
    )
    rejected = F.to_json(
        F.struct(
            F.col("o.id").alias("id"),
            F.col("o.customer").alias("customer"),
            F.lit("rejected").alias("status"),
            F.lit("amount must be positive").alias("reason"),
        )
    )
    return orders.select("key", F.when(valid, accepted).otherwise(rejected).alias("value"))


def _with_faults(writer: Any, args: argparse.Namespace) -> Any:
    if args.faults:
        writer = writer.option("onceflow.faults", args.faults)
        writer = writer.option("onceflow.faults.dir", args.faults_dir)
    return writer


def build_query(spark: Any, args: argparse.Namespace) -> Any:
    """Start the streaming query; returns the StreamingQuery."""
    reader = (
        spark.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
        .option("startingOffsets", "earliest")
    )
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
    if args.max_records_per_partition:
        reader = reader.option("maxRecordsPerPartition", args.max_records_per_partition)
    writer = (
        validate_orders(reader.load())
        .writeStream.format("onceflow")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("checkpointLocation", args.checkpoint)
        .option("deliveryGuarantee", args.delivery_guarantee)
    )
    writer = _with_faults(writer, args)
    if args.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger)
    return writer.start()


def run_batch_job(spark: Any, args: argparse.Namespace) -> int:
    """The same transform as one batch job (`--batch`): every committed input record up to
    the last stable offset, written once (with `--job-id`, a re-run of a failed job finishes
    it instead of writing it again). Returns the number of rows written."""
    reader = (
        spark.read.format("onceflow")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.input)
    )
    if args.max_records_per_partition:
        reader = reader.option("maxRecordsPerPartition", args.max_records_per_partition)
    out = validate_orders(reader.load()).cache()
    writer = (
        out.write.format("onceflow")
        .mode("append")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("topic", args.output)
        .option("deliveryGuarantee", args.delivery_guarantee)
    )
    if args.job_id:
        writer = writer.option("jobId", args.job_id)
    _with_faults(writer, args).save()
    return int(out.count())


def session(master: str, app_name: str = "onceflow-pipeline", **conf: str) -> Any:
    """A SparkSession with the onceflow data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import onceflow.spark

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
        # a loaded machine can be slower than the default 15 s for a worker's handshake
        .config("spark.python.authenticate.socketTimeout", "60s")
    )
    for key, value in conf.items():
        builder = builder.config(key.replace("_", "."), value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    onceflow.spark.register(spark)
    return spark


def remote_session(url: str) -> Any:
    """A Spark Connect session (`sc://HOST:PORT`) with the onceflow data source registered.
    The job's settings (Python, shuffle partitions) are the Connect server's."""
    from pyspark.sql import SparkSession

    import onceflow.spark

    spark = SparkSession.builder.remote(url).getOrCreate()
    onceflow.spark.register(spark)
    return spark


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m onceflow.spark.pipeline", description=__doc__)
    p.add_argument("--bootstrap", required=True, help="kafka.bootstrap.servers")
    p.add_argument("--input", default="orders")
    p.add_argument("--output", default="orders-validated")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--remote", default="", help="a Spark Connect server (sc://HOST:PORT)")
    p.add_argument("--max-offsets-per-trigger", type=int, default=0)
    p.add_argument("--max-records-per-partition", type=int, default=0)
    p.add_argument("--trigger", default="available-now", help="available-now or an interval")
    p.add_argument("--delivery-guarantee", default="exactly_once")
    p.add_argument("--faults", default="", help="sink fault points (onceflow.spark.faults)")
    p.add_argument("--faults-dir", default="")
    p.add_argument("--batch", action="store_true", help="one batch job instead of a stream")
    p.add_argument("--job-id", default="", help="with --batch: the sink's jobId option")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    spark = remote_session(args.remote) if args.remote else session(args.master)
    try:
        if args.batch:
            rows = run_batch_job(spark, args)
            print(f"{SUMMARY_PREFIX} batches=1 rows={rows}", flush=True)
            return 0
        query = build_query(spark, args)
        query.awaitTermination()
        progress = query.recentProgress
        rows = sum(p.numInputRows for p in progress)  # a property: Connect leaves the key None
        millis = sum(p.durationMs.get("triggerExecution", 0) for p in progress)
        print(f"{SUMMARY_PREFIX} batches={len(progress)} rows={rows} ms={millis}", flush=True)
        return 0
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
