"""confluent-kafka (librdkafka) against a live broker, for Kafka behaviours that librdkafka's
own integration suite checks: keys on compacted topics, DeleteRecords, authorized operations.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

N = 100
KEYLESS = set(range(3, N, 10))  # 10 of the 100 records have no key


def _admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(broker, topic: str, partitions: int = 1, config: dict | None = None) -> None:
    admin = _admin(broker)  # kept alive until the future is done
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])
    futures[topic].result(30)


def test_keyless_records_on_a_compacted_topic_fail_and_are_named(broker):
    topic = "compacted"
    _create(broker, topic, config={"cleanup.policy": "compact"})
    reports: dict[int, KafkaError | None] = {}
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 5000,  # all 100 records go in one batch, sent by flush()
            "batch.num.messages": 1000,
            "enable.idempotence": False,
        }
    )
    for i in range(N):
        key = None if i in KEYLESS else b"key-%d" % i
        producer.produce(
            topic,
            key=key,
            value=b"%d" % i,
            partition=0,
            on_delivery=lambda err, msg: reports.__setitem__(int(msg.value()), err),
        )
    assert producer.flush(30) == 0
    assert len(reports) == N and all(err is not None for err in reports.values())
    named = {i for i, err in reports.items() if err.code() == KafkaError.INVALID_RECORD}
    assert named == KEYLESS  # from record_errors; confluent-kafka does not expose their text
    others = {err.code() for i, err in reports.items() if i not in KEYLESS}
    assert others == {KafkaError._INVALID_DIFFERENT_RECORD}
    low, high = _watermarks(broker, topic)
    assert (low, high) == (0, 0)  # nothing was appended


def _watermarks(broker, topic: str, partition: int = 0) -> tuple[int, int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(_tp(topic, partition), timeout=10)
    finally:
        consumer.close()


def _tp(topic: str, partition: int, offset: int = -1001):
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition, offset)
