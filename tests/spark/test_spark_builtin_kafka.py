"""The same queries through Spark's built-in `kafka` format (spark-sql-kafka-0-10) and through
`onceflow`, on one topic, on onceflow's broker and on Apache Kafka (transaction version 2):
the same rows, so each shared option means what it means in Spark.

The topic holds committed and aborted transactions from two producers, keys and headers;
both formats read it with `kafka.isolation.level=read_committed` (Spark's default is
read_uncommitted, ours read_committed: docs/spark.md), as batch queries with offsets given as
`earliest`/`latest` and as JSON, with `subscribe`, `subscribePattern` and `assign`, and as a
streaming query with `maxOffsetsPerTrigger` under `Trigger.AvailableNow`.
"""

from __future__ import annotations

import random

import pytest
from support.broker import BrokerProcess
from support.peers import KAFKA_TV2, ONCEFLOW

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer

pytestmark = pytest.mark.slow

COLUMNS = "key, value, topic, partition, offset, timestamp, timestampType, headers"


@pytest.fixture(scope="module", params=[ONCEFLOW, pytest.param(KAFKA_TV2, marks=pytest.mark.kafka)])
def source_topic(request, tmp_path_factory):
    """(bootstrap, topic): a 3-partition topic with interleaved committed and aborted
    transactions, on a onceflow broker or a 1-node Kafka cluster."""
    broker = None
    if request.param == ONCEFLOW:
        broker = BrokerProcess(tmp_path_factory.mktemp("builtin") / "data")
        bootstrap = broker.bootstrap
    else:
        bootstrap = request.getfixturevalue("kafka_clusters").get(1, 2).bootstrap
    topic = f"side-by-side-{tmp_path_factory.mktemp('t').name}"
    try:
        _fill(bootstrap, topic)
        yield bootstrap, topic
    finally:
        if broker is not None:
            broker.stop()


def _fill(bootstrap: str, topic: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, 3, 1)])[topic].ok
    rng = random.Random(5)
    producers = [
        Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{i}"})
        for i in range(2)
    ]
    try:
        for producer in producers:
            producer.init_transactions(30)
        for txn in range(24):
            producer = producers[txn % 2]
            producer.begin_transaction()
            for i in range(rng.randint(1, 30)):
                value = b"t%d-%d" % (txn, i)
                key = None if i % 7 == 0 else value[:4]
                producer.send(topic, value, key=key, headers=[("h", value)])
            producer.flush(30)
            if txn % 3 == 2:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
    finally:
        for producer in producers:
            producer.close()


def _rows(session, fmt: str, bootstrap: str, **options: str) -> list[tuple]:
    reader = (
        session.read.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    rows = reader.load().selectExpr(*COLUMNS.split(", ")).collect()
    return sorted((tuple(row) for row in rows), key=lambda row: (row[3], row[4]))


@pytest.mark.parametrize(
    "options",
    [
        {"startingOffsets": "earliest", "endingOffsets": "latest"},
        {"startingOffsets": '{"T": {"0": 5, "1": -2, "2": 3}}', "endingOffsets": "latest"},
        {
            "startingOffsets": '{"T": {"0": -2, "1": 4, "2": -2}}',
            "endingOffsets": '{"T": {"0": 30, "1": -1, "2": 17}}',
        },
    ],
    ids=["earliest-latest", "json-start", "json-both"],
)
@pytest.mark.parametrize("select", ["subscribe", "subscribePattern", "assign"])
def test_batch_reads_give_spark_s_rows(session, source_topic, select, options):
    bootstrap, topic = source_topic
    chosen = {
        "subscribe": topic,
        "subscribePattern": topic.replace("-", "[-]"),
        "assign": f'{{"{topic}": [0, 1, 2]}}',
    }[select]
    options = {name: value.replace('"T"', f'"{topic}"') for name, value in options.items()}
    theirs = _rows(session, "kafka", bootstrap, **{select: chosen}, **options)
    ours = _rows(session, "onceflow", bootstrap, **{select: chosen}, **options)
    assert theirs, "Spark's source read nothing"
    assert ours == theirs


def test_available_now_stream_with_max_offsets_per_trigger(session, source_topic, tmp_path):
    """A streaming query under Trigger.AvailableNow with maxOffsetsPerTrigger reads the same
    rows in both formats, in more than one micro-batch."""
    bootstrap, topic = source_topic
    results = {}
    for fmt in ("kafka", "onceflow"):
        stream = (
            session.readStream.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.isolation.level", "read_committed")
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "150")
            .load()
            .selectExpr("partition", "offset", "value")
        )
        name = f"side_by_side_{fmt}"
        query = (
            stream.writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / fmt))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
        results[fmt] = sorted(tuple(r) for r in session.table(name).collect())
        assert len(batches) > 1, f"{fmt}: one batch only; maxOffsetsPerTrigger had no effect"
    assert results["onceflow"] == results["kafka"] and results["kafka"]
