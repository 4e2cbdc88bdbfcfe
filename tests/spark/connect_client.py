"""A Spark Connect client for test_spark_connect.py, run as its own process: a Python process
that has a classic SparkContext (the other Spark tests' session) cannot open a Connect session.

    python connect_client.py register URL
    python connect_client.py batch URL BOOTSTRAP INPUT OUTPUT

`register` registers the onceflow data source (exit 3 with the message on SpeculationError).
`batch` reads INPUT's partition 0 from offset 1 to 4 with headers, writes what it read to
OUTPUT, and tries a write with a bad option. The last line printed is a JSON report.
"""

from __future__ import annotations

import json
import sys


def _session(url: str):
    from pyspark.sql import SparkSession

    import onceflow.spark

    spark = SparkSession.builder.remote(url).getOrCreate()
    onceflow.spark.register(spark)
    return spark


def register(url: str) -> dict:
    import onceflow.spark

    try:
        spark = _session(url)
    except onceflow.spark.SpeculationError as exc:
        print(json.dumps({"refused": str(exc)}))
        sys.exit(3)
    return {"registered": type(spark).__module__}


def batch(url: str, bootstrap: str, source: str, target: str) -> dict:
    spark = _session(url)
    df = (
        spark.read.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", json.dumps({source: [0]}))
        .option("startingOffsets", json.dumps({source: {"0": 1}}))
        .option("endingOffsets", json.dumps({source: {"0": 4}}))
        .option("includeHeaders", "true")
        .load()
    )
    rows = [
        [r.partition, r.offset, bytes(r.value).decode(), [[h.key, bytes(h.value).decode()]
         for h in r.headers]]
        for r in df.orderBy("offset").collect()
    ]  # fmt: skip
    writer = df.select("key", "value", "headers").write.format("onceflow").mode("append")
    writer = writer.option("kafka.bootstrap.servers", bootstrap).option("topic", target)
    writer.save()
    try:
        writer.option("deliveryGuarantee", "sometimes").save()
        bad_option = None
    except Exception as exc:  # Spark Connect wraps the data source's error
        bad_option = str(exc)
    return {"rows": rows, "bad_option": bad_option}


def main(argv: list[str]) -> int:
    command, *args = argv
    report = register(*args) if command == "register" else batch(*args)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
