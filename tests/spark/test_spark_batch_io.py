"""Batch queries through a real local Spark session: `spark.read.format("onceflow")` returns
exactly what a read_committed consumer sees (aborted transactions interleaved), with Spark's
Kafka schema; `df.write.format("onceflow").mode("append")` writes each row once, in one
transaction per task committed by the driver, and a failed job leaves nothing visible and
nothing open; Overwrite is refused."""

from __future__ import annotations

import random

import pytest

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.spark.orders import end_offsets, read_committed

pytestmark = pytest.mark.slow


def _topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(name, partitions, 1)])[name].ok


def _two_partitions_of_20(bootstrap: str, name: str) -> None:
    """A 2-partition topic with records b"0".."39", record i in partition i % 2."""
    _topic(bootstrap, name, 2)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(40):
            producer.send(name, b"%d" % i, partition=i % 2)
        producer.flush(30)


def test_batch_read_matches_a_read_committed_consumer(session, module_broker):
    bootstrap = module_broker.bootstrap
    _topic(bootstrap, "mixed")
    rng = random.Random(11)
    producers = [
        Producer({"bootstrap.servers": bootstrap, "transactional.id": f"mixed-{i}"})
        for i in range(2)
    ]
    for producer in producers:
        producer.init_transactions(30)
    aborted = set()
    for txn in range(30):  # two producers' transactions interleave, a third are aborted
        producer = producers[txn % 2]
        producer.begin_transaction()
        values = [b"t%d-%d" % (txn, i) for i in range(rng.randint(1, 40))]
        for value in values:
            producer.send("mixed", value, key=value[:3], headers=[("h", value)])
        producer.flush(30)  # aborted records too must be in the log
        if rng.random() < 0.33:
            producer.abort_transaction(30)
            aborted.update(values)
        else:
            producer.commit_transaction(30)
    for producer in producers:
        producer.close()
    expected = read_committed(bootstrap, "mixed", 3)
    df = (
        session.read.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "mixed")
        .option("includeHeaders", "true")
        .option("minPartitions", "5")
        .load()
    )
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]  # fmt: skip
    rows = df.collect()
    got = sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows)
    want = sorted((r.partition, r.offset, r.key, r.value) for r in expected)
    assert got == want and aborted and not aborted & {g[3] for g in got}
    assert all(r.headers == [("h", r.value)] and r.topic == "mixed" for r in rows)


def test_batch_read_with_offsets_json(session, module_broker):
    bootstrap = module_broker.bootstrap
    _two_partitions_of_20(bootstrap, "ranged")
    df = (
        session.read.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("assign", '{"ranged": [0, 1]}')
        .option("startingOffsets", '{"ranged": {"0": 5, "1": -2}}')
        .option("endingOffsets", '{"ranged": {"0": 8, "1": -1}}')
        .load()
    )
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, 5), (0, 6), (0, 7)] + [(1, o) for o in range(20)]


def test_batch_read_cut_by_max_records_per_partition(session, module_broker):
    bootstrap = module_broker.bootstrap
    _two_partitions_of_20(bootstrap, "capped")
    df = (
        session.read.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "capped")
        .option("maxRecordsPerPartition", "7")
        .load()
    )
    assert df.rdd.getNumPartitions() == 6  # 20 offsets per partition: 3 tasks of at most 7
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(p, o) for p in (0, 1) for o in range(20)]


def test_batch_write_each_row_once(session, module_broker):
    bootstrap = module_broker.bootstrap
    _topic(bootstrap, "written")
    df = session.range(1000).selectExpr(
        "cast(id as string) as key", "concat('value-', cast(id as string)) as value"
    )
    df.write.format("onceflow").mode("append").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", "written"
    ).save()
    records = read_committed(bootstrap, "written", 3)
    assert sorted(r.value for r in records) == sorted(b"value-%d" % i for i in range(1000))
    assert end_offsets(bootstrap, "written", 3, True) == end_offsets(bootstrap, "written", 3, False)


def test_overwrite_is_refused(session, module_broker):
    df = session.range(3).selectExpr("cast(id as string) as value")
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        df.write.format("onceflow").mode("overwrite").option(
            "kafka.bootstrap.servers", module_broker.bootstrap
        ).option("topic", "written").save()


def test_failed_batch_write_leaves_nothing(session, module_broker):
    """A task fails after others wrote their share: the driver aborts every transaction."""
    bootstrap = module_broker.bootstrap
    _topic(bootstrap, "failed-write")
    df = session.range(0, 300, 1, 3).selectExpr(
        "cast(id as string) as value",
        "case when id = 299 then cast(raise_error('boom') as int) else 0 end as partition",
    )
    with pytest.raises(Exception, match="boom"):
        df.write.format("onceflow").mode("append").option(
            "kafka.bootstrap.servers", bootstrap
        ).option("topic", "failed-write").save()
    assert read_committed(bootstrap, "failed-write", 3) == []
    lso = end_offsets(bootstrap, "failed-write", 3, True)
    assert lso == end_offsets(bootstrap, "failed-write", 3, False)
