"""confluent-kafka (librdkafka) against a live broker, for Kafka behaviours that librdkafka's
own integration suite checks: keys on compacted topics, DeleteRecords, authorized operations.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from interop.workload import first_message

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


TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS"}
TOPIC_OPS |= {"ALTER_CONFIGS"}
CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS |= {"IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def _names(operations) -> set[str] | None:
    return None if operations is None else {op.name for op in operations}


def test_authorized_operations_are_every_supported_operation_when_asked(broker):
    from confluent_kafka import Consumer, TopicCollection

    _create(broker, "described")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "described-group"})
    try:  # a committed offset makes the group exist (Empty, no error)
        consumer.commit(offsets=[_tp("described", 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    admin = _admin(broker)
    for asked in (True, False):
        topic = admin.describe_topics(
            TopicCollection(["described"]), include_authorized_operations=asked
        )["described"].result(30)
        cluster = admin.describe_cluster(include_authorized_operations=asked).result(30)
        group = admin.describe_consumer_groups(
            ["described-group"], include_authorized_operations=asked
        )["described-group"].result(30)
        if asked:
            assert _names(topic.authorized_operations) == TOPIC_OPS
            assert _names(cluster.authorized_operations) == CLUSTER_OPS
            assert _names(group.authorized_operations) == GROUP_OPS
        else:  # the broker answers INT32_MIN, which librdkafka reports as no list at all
            assert topic.authorized_operations is None
            assert cluster.authorized_operations is None
            assert group.authorized_operations is None


def _produce(broker, topic: str, n: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(n):
        producer.produce(topic, key=b"k", value=b"%d" % i, partition=partition)
        producer.poll(0)
    assert producer.flush(30) == 0


def test_delete_records_moves_the_low_watermark(broker):
    from confluent_kafka import Consumer, KafkaException

    topic = "trimmed"
    _create(broker, topic, partitions=2)
    _produce(broker, topic, 50, partition=0)
    admin = _admin(broker)
    futures = admin.delete_records([_tp(topic, 0, 20), _tp(topic, 1, 5)])
    results = {tp.partition: f for tp, f in futures.items()}
    assert results[0].result(30).low_watermark == 20
    try:  # partition 1 is empty: 5 is above its high watermark
        results[1].result(30)
        raise AssertionError("expected OFFSET_OUT_OF_RANGE")
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert _watermarks(broker, topic) == (20, 50)
    # a consumer positioned below the start is reset (auto.offset.reset=earliest) to it
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "trimmed-reader",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([_tp(topic, 0, 3)])
        message = first_message(consumer)
        assert message is not None and message.offset() == 20
    finally:
        consumer.close()
    (future,) = admin.delete_records([_tp(topic, 0, -1)]).values()  # -1: the high watermark
    assert future.result(30).low_watermark == 50
