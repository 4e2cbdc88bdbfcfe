"""onceflow Producer/Consumer against a live broker (onceflow's, Apache Kafka TV2 and TV1),
cross-checked with confluent-kafka and kafka-python (plain, non-idempotent produce path)."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition

from client.helpers import create_topic
from onceflow.client.consumer import Consumer
from onceflow.client.errors import OffsetOutOfRangeError
from onceflow.client.producer import Producer
from onceflow.client.producer.partitioner import default_partition

PARTITIONS = 3


def produce_keyed(
    bootstrap: str, topic: str, n: int, **config
) -> dict[int, list[tuple[int, bytes]]]:
    """onceflow Producer, idempotence off: n records with keys; returns partition ->
    [(offset, value)] in offset order, from the futures (without idempotence a retried batch
    may land after later ones, as with Kafka's producer: on Kafka a partition of a topic just
    created can answer NOT_LEADER_OR_FOLLOWER for a moment)."""
    settings = {"bootstrap.servers": bootstrap, "enable.idempotence": False, **config}
    with Producer(settings) as producer:
        futures = [
            (producer.send(topic, b"value-%06d" % i, key=b"key-%d" % (i % 97)), b"value-%06d" % i)
            for i in range(n)
        ]
        producer.flush(60)
        by_partition: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        for future, value in futures:
            md = future.result(0)
            by_partition[md.partition].append((md.offset, value))
    return {partition: sorted(placed) for partition, placed in by_partition.items()}


def onceflow_consume(
    bootstrap: str, topic: str, n: int, **config
) -> dict[int, list[tuple[int, bytes]]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **config})
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    try:
        consumer.assign([(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        total = 0
        while total < n and time.monotonic() < deadline:
            for record in consumer.poll(0.5):
                got[record.partition].append((record.offset, record.value))
                total += 1
    finally:
        consumer.close()
    return got


def confluent_consume(bootstrap: str, topic: str, n: int) -> dict[int, list[tuple[int, bytes]]]:
    consumer = CKConsumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([CKTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    deadline = time.monotonic() + 60
    total = 0
    try:
        while total < n and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=5000, timeout=0.5):
                if msg.error() is None:
                    got[msg.partition()].append((msg.offset(), msg.value()))
                    total += 1
    finally:
        consumer.close()
    return got


def kafka_python_consume(bootstrap: str, topic: str, n: int) -> dict[int, list[tuple[int, bytes]]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    deadline = time.monotonic() + 60
    total = 0
    try:
        while total < n and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    got[tp.partition].append((record.offset, record.value))
                    total += 1
    finally:
        consumer.close()
    return got


def test_onceflow_producer_read_back_by_confluent_and_kafka_python(peer) -> None:
    create_topic(peer.bootstrap, peer.name("ten-k"))
    sent = produce_keyed(peer.bootstrap, peer.name("ten-k"), 10_000)
    assert sum(len(v) for v in sent.values()) == 10_000
    assert set(sent) == set(range(PARTITIONS))
    for partition, records in sent.items():
        offsets = [offset for offset, _ in records]
        assert offsets == list(range(len(records))), f"partition {partition} offsets not dense"
        for offset, value in records:
            key = b"key-%d" % (int(value[6:]) % 97)
            assert default_partition(key, PARTITIONS) == partition, (offset, value)
    for consume in (confluent_consume, kafka_python_consume, onceflow_consume):
        got = consume(peer.bootstrap, peer.name("ten-k"), 10_000)
        assert dict(got) == dict(sent), consume.__name__


def test_confluent_and_kafka_python_write_onceflow_reads(peer) -> None:
    from kafka import KafkaProducer

    create_topic(peer.bootstrap, peer.name("foreign"))
    # idempotence keeps each partition in send order through retries (a new Kafka topic's
    # leaders may answer NOT_LEADER_OR_FOLLOWER for a moment after CreateTopics)
    ck = CKProducer(
        {"bootstrap.servers": peer.bootstrap, "linger.ms": 5, "enable.idempotence": True}
    )
    for i in range(3000):
        ck.produce(
            peer.name("foreign"), b"ck-%d" % i, partition=i % PARTITIONS, headers=[("src", b"ck")]
        )
    assert ck.flush(30) == 0
    kp = KafkaProducer(
        bootstrap_servers=peer.bootstrap, enable_idempotence=False, acks="all",
        max_in_flight_requests_per_connection=1,  # in order without idempotence
    )  # fmt: skip
    for i in range(3000):
        kp.send(peer.name("foreign"), b"kp-%d" % i, key=b"k", partition=i % PARTITIONS)
    kp.flush(30)
    kp.close()
    got = onceflow_consume(peer.bootstrap, peer.name("foreign"), 6000)
    for partition in range(PARTITIONS):
        values = [v for _, v in got[partition]]
        assert [o for o, _ in got[partition]] == list(range(2000))
        assert values[:1000] == [b"ck-%d" % i for i in range(partition, 3000, PARTITIONS)]
        assert values[1000:] == [b"kp-%d" % i for i in range(partition, 3000, PARTITIONS)]


def test_records_carry_keys_headers_and_timestamps(peer) -> None:
    create_topic(peer.bootstrap, peer.name("fields"), 1)
    with Producer({"bootstrap.servers": peer.bootstrap, "enable.idempotence": False}) as p:
        md = p.send(
            peer.name("fields"), b"v", key="k", headers={"a": b"1", "b": None}, timestamp=1234
        ).result(10)
        p.send(peer.name("fields"), None, key=b"tombstone").result(10)
    assert (md.topic, md.partition, md.offset, md.timestamp) == (peer.name("fields"), 0, 0, 1234)
    with Consumer({"bootstrap.servers": peer.bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([(peer.name("fields"), 0)])
        records = []
        deadline = time.monotonic() + 20
        while len(records) < 2 and time.monotonic() < deadline:
            records += c.poll(0.5)
    first, second = records
    assert (first.key, first.value, first.headers, first.timestamp) == (
        b"k",
        b"v",
        [("a", b"1"), ("b", None)],
        1234,
    )
    assert (second.key, second.value, second.offset) == (b"tombstone", None, 1)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips(peer, codec: str) -> None:
    topic = peer.name(f"codec-{codec}")
    create_topic(peer.bootstrap, topic)
    sent = produce_keyed(peer.bootstrap, topic, 2000, **{"compression.type": codec})
    assert dict(onceflow_consume(peer.bootstrap, topic, 2000)) == dict(sent)
    assert dict(confluent_consume(peer.bootstrap, topic, 2000)) == dict(sent)


@pytest.mark.parametrize("partitioner_client", ["confluent", "kafka-python"])
def test_key_placement_matches_other_clients(peer, partitioner_client: str) -> None:
    topic = peer.name(f"placement-{partitioner_client}")
    create_topic(peer.bootstrap, topic, 7)
    keys = [b"user-%d" % i for i in range(300)] + [b"", b"\x00\xff", "ключ".encode()]
    if partitioner_client == "confluent":
        producer = CKProducer(
            {"bootstrap.servers": peer.bootstrap, "partitioner": "murmur2_random"}
        )
        for key in keys:
            producer.produce(topic, key, key=key)
        assert producer.flush(30) == 0
    else:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=peer.bootstrap, enable_idempotence=False)
        for key in keys:
            producer.send(topic, key, key=key)
        producer.flush(30)
        producer.close()
    consumer = Consumer({"bootstrap.servers": peer.bootstrap, "auto.offset.reset": "earliest"})
    consumer.assign([(topic, p) for p in range(7)])
    placed = {}
    deadline = time.monotonic() + 30
    while len(placed) < len(keys) and time.monotonic() < deadline:
        for record in consumer.poll(0.5):
            placed[record.key] = record.partition
    consumer.close()
    assert len(placed) == len(keys)
    with Producer({"bootstrap.servers": peer.bootstrap, "enable.idempotence": False}) as ours:
        for key in keys:
            assert ours.send(topic, b"x", key=key).result(10).partition == placed[key], key


def test_keyless_records_stick_to_a_partition_per_batch(peer) -> None:
    create_topic(peer.bootstrap, peer.name("sticky"), 3)
    with Producer(
        {"bootstrap.servers": peer.bootstrap, "enable.idempotence": False, "linger.ms": 50}
    ) as p:
        futures = [p.send(peer.name("sticky"), b"x" * 100) for _ in range(50)]
        partitions = {f.result(10).partition for f in futures}
    assert len(partitions) == 1  # one batch's worth, one partition


def test_consumer_offset_reset_policies_and_seek(peer) -> None:
    topic = peer.name("reset")
    create_topic(peer.bootstrap, topic, 1)
    with Producer({"bootstrap.servers": peer.bootstrap, "enable.idempotence": False}) as p:
        for i in range(10):
            p.send(topic, b"%d" % i)
    base = {"bootstrap.servers": peer.bootstrap}
    with Consumer({**base, "auto.offset.reset": "latest"}) as c:
        c.assign([(topic, 0)])
        assert c.position((topic, 0), 10) == 10
        c.seek((topic, 0), 4)
        assert c.position((topic, 0)) == 4
        records = []
        deadline = time.monotonic() + 10
        while len(records) < 6 and time.monotonic() < deadline:
            records += c.poll(0.5)
        assert [r.value for r in records] == [b"%d" % i for i in range(4, 10)]
        c.seek_to_beginning()
        assert c.position((topic, 0), 10) == 0
    with Consumer({**base, "auto.offset.reset": "none"}) as c:
        c.assign([(topic, 0)])
        with pytest.raises(OffsetOutOfRangeError, match="no reset policy"):
            c.poll(0.2)
        c.seek((topic, 0), 50)
        with pytest.raises(OffsetOutOfRangeError, match=f"out of range for partition {topic}-0"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                c.poll(0.5)
    with Consumer({**base, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, 0, 50)])
        deadline = time.monotonic() + 10
        records = []
        while not records and time.monotonic() < deadline:
            records = c.poll(0.5)
        assert records[0].offset == 0  # out of range -> reset to earliest


def test_producer_delivery_callbacks_and_flush(peer) -> None:
    create_topic(peer.bootstrap, "callbacks", 3)
    reports = []
    with Producer({"bootstrap.servers": peer.bootstrap, "enable.idempotence": False}) as p:
        for i in range(100):
            p.send("callbacks", b"%d" % i, on_delivery=lambda err, md: reports.append((err, md)))
        p.flush(30)
        assert len(reports) == 100
        assert all(err is None and md.offset >= 0 for err, md in reports)


def test_default_idempotent_producer_needs_init_producer_id() -> None:
    """Against a broker that does not advertise InitProducerId (a fake one: ours always
    does), the default idempotent producer fails clearly instead of writing unsafely."""
    from client.fake_broker import VERSIONS, ProducerFakeBroker
    from onceflow.client.errors import UnsupportedVersionError
    from onceflow.protocol.api_keys import ApiKey

    versions = {k: v for k, v in VERSIONS.items() if k != ApiKey.INIT_PRODUCER_ID}
    fake = ProducerFakeBroker({"needs-pid": 1}, versions)
    try:
        with Producer({"bootstrap.servers": fake.bootstrap}) as p:  # idempotent by default
            future = p.send("needs-pid", b"v")
            with pytest.raises(UnsupportedVersionError, match="set enable.idempotence=false"):
                future.result(10)
            with pytest.raises(UnsupportedVersionError):
                p.send("needs-pid", b"again")
        assert fake.log == {}  # nothing was written
    finally:
        fake.stop()
