"""DeleteRecords survives kill -9: once the broker has answered, the new log start offset is
on disk, so a crash right after the answer and a restart keep it (Kafka itself checkpoints it
only every `log.flush.start.offset.checkpoint.interval.ms`; onceflow makes it durable first).
"""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from interop.workload import first_message


def _watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def test_log_start_offset_survives_kill_9_after_the_answer(broker_factory):
    broker = broker_factory(extra_config={"log.segment.bytes": 2048})
    topic = "trim-crash"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(200):
        producer.produce(topic, value=b"record-%03d" % i, partition=i % 2)
        producer.poll(0)
    assert producer.flush(30) == 0
    # partition 0: a start inside a segment; partition 1: up to the high watermark
    futures = admin.delete_records([TopicPartition(topic, 0, 77), TopicPartition(topic, 1, -1)])
    answered = {tp.partition: f.result(30).low_watermark for tp, f in futures.items()}
    assert answered == {0: 77, 1: 100}

    broker.restart(kill=True)  # SIGKILL right after the answers: no shutdown checkpoint

    assert _watermarks(broker.bootstrap, topic, 0) == (77, 100)
    assert _watermarks(broker.bootstrap, topic, 1) == (100, 100)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "after-crash",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        first = first_message(consumer)
        assert first is not None
        assert (first.offset(), first.value()) == (77, b"record-154")
    finally:
        consumer.close()
