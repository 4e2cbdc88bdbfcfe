"""The stream reader's driver side without Spark: planning against a live broker, retries of
offset lookups across a broker restart, and progress committed to kafka.group.id."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
from support.broker import BrokerProcess

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition
from onceflow.spark.options import parse_source_options
from onceflow.spark.source import KafkaStreamReader
from onceflow.spark.topic_ids import TOPIC_IDS_KEY


@pytest.fixture
def planning_broker(tmp_path):
    broker = BrokerProcess(tmp_path / "data")
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.create_topics([NewTopic("plan", 2, 1)])["plan"].ok
    with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
        for i in range(100):
            producer.send("plan", b"v%d" % i, partition=i % 2)
        producer.flush(30)
    yield broker
    broker.stop()


def _reader(bootstrap: str, **extra: str) -> KafkaStreamReader:
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "plan", **extra}
    return KafkaStreamReader(parse_source_options(options, batch=False))


def _spark_offsets(data: dict) -> dict:
    """The offset JSON without onceflow's topic ids: what Spark's Kafka source logs."""
    assert set(data[TOPIC_IDS_KEY]) == {"plan"}
    return {k: v for k, v in data.items() if k != TOPIC_IDS_KEY}


def test_plans_with_rate_limit_and_commits_progress_to_the_group(planning_broker):
    reader = _reader(
        planning_broker.bootstrap, startingOffsets="earliest", **{"kafka.group.id": "lag-view"}
    )
    start = reader.initialOffset()
    assert _spark_offsets(start) == {"plan": {"0": 0, "1": 0}}
    assert reader.getDefaultReadLimit() == ReadAllAvailable()
    end = reader.latestOffset(start, ReadMaxRows(30))
    assert _spark_offsets(end) == {"plan": {"0": 15, "1": 15}}
    ranges = [p.range for p in reader.partitions(start, end)]
    assert [(r.partition, r.from_offset, r.until_offset) for r in ranges] == [
        (0, 0, 15),
        (1, 0, 15),
    ]
    reader.commit(end)
    with AdminClient({"bootstrap.servers": planning_broker.bootstrap}) as admin:
        tps = [TopicPartition("plan", 0), TopicPartition("plan", 1)]
        committed = admin.list_consumer_group_offsets("lag-view", tps)
    assert committed == {tps[0]: (15, ""), tps[1]: (15, "")}
    later = reader.latestOffset(end, ReadAllAvailable())
    assert _spark_offsets(later) == {"plan": {"0": 50, "1": 50}}
    reader.stop()


def test_plans_tasks_of_at_most_max_records_per_partition(planning_broker):
    reader = _reader(
        planning_broker.bootstrap, startingOffsets="earliest", maxRecordsPerPartition="20"
    )
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    planned = [p.range for p in reader.partitions(start, end)]
    # 50 offsets per partition: 3 even tasks of at most 20 each
    assert [(r.partition, r.from_offset, r.until_offset) for r in planned] == [
        (p, a, b) for p in (0, 1) for a, b in ((0, 16), (16, 33), (33, 50))
    ]
    reader.stop()


def test_offset_lookups_survive_a_broker_restart(planning_broker):
    reader = _reader(planning_broker.bootstrap, **{"fetchOffset.retryIntervalMs": "500"})
    start = reader.initialOffset()  # latest: nothing old is read
    assert _spark_offsets(start) == {"plan": {"0": 50, "1": 50}}
    planning_broker.restart(kill=True)  # the reader's connection is now dead
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    reader.stop()
