"""Topic ids in the source's offsets, without a Spark session: the offset JSON keeps them
beside Spark's per-partition offsets; a batch re-planned after its topic was recreated (a
restart re-plans the last logged batch) is data loss, not a read of the new topic's records
at the old offsets."""

from __future__ import annotations

import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.spark.offsets import DataLossError
from onceflow.spark.options import parse_source_options
from onceflow.spark.source import KafkaStreamReader
from onceflow.spark.topic_ids import TOPIC_IDS_KEY, join_offsets, split_offsets


def test_offset_json_keeps_ids_beside_spark_offsets():
    offsets = {("a", 0): 5, ("a", 1): 7, ("b", 0): 1}
    data = join_offsets(offsets, {"a": "id-a", "gone": "id-gone"})
    assert data == {"a": {"0": 5, "1": 7}, "b": {"0": 1}, TOPIC_IDS_KEY: {"a": "id-a"}}
    assert split_offsets(data) == (offsets, {"a": "id-a"})
    assert split_offsets({"a": {"0": 5}}) == ({("a", 0): 5}, {})  # logged by older versions


def _reader(bootstrap: str, topic: str, fail_on_data_loss: bool) -> KafkaStreamReader:
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "failOnDataLoss": str(fail_on_data_loss).lower(),
    }
    return KafkaStreamReader(parse_source_options(options, batch=False))


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_batch_replanned_after_its_topic_was_recreated(module_broker, fail_on_data_loss):
    bootstrap, topic = module_broker.bootstrap, f"replanned-{fail_on_data_loss}".lower()
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)])[topic].ok
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for i in range(5):
                producer.send(topic, b"%d" % i, partition=0)
            producer.flush(30)
        first = _reader(bootstrap, topic, fail_on_data_loss)
        start = first.initialOffset()
        end = first.latestOffset(start, ReadAllAvailable())
        assert [p.range.until_offset for p in first.partitions(start, end)] == [5]
        first.stop()
        assert admin.delete_topics([topic])[topic].ok
        deadline = time.monotonic() + 30
        while not admin.create_topics([NewTopic(topic, 1, 1)])[topic].ok:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    restarted = _reader(bootstrap, topic, fail_on_data_loss)
    try:
        if fail_on_data_loss:
            with pytest.raises(DataLossError, match=f"Topic {topic} was recreated .* planned"):
                restarted.partitions(start, end)
        else:
            assert restarted.partitions(start, end) == []
            later = restarted.latestOffset(end, ReadAllAvailable())
            assert split_offsets(later)[1] != split_offsets(end)[1]  # the new topic's id
    finally:
        restarted.stop()
