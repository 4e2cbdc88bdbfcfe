"""Golden test: record batches written by librdkafka (confluent-kafka) decode with ours.

No broker is needed: the scripted fake (`tests/support/fake_broker.py`) answers ApiVersions,
Metadata, InitProducerId and Produce just enough for librdkafka to send its batches, and keeps
the raw `records` bytes of every Produce request. librdkafka writes plain (non-xerial) snappy,
LZ4 frames and zstd frames of its own, so this checks our codecs against a C implementation.
"""

import pytest
from support.fake_broker import FakeBroker

from onceflow.log.validator import validate_batch
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.init_producer_id import InitProducerIdResponse
from onceflow.protocol.messages.produce import ProduceResponse
from onceflow.records.batch import HEADER_SIZE, iter_batches, verify_crc
from onceflow.records.compression import XERIAL_MAGIC, CompressionType
from onceflow.records.record import decode_records

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "golden"
PRODUCER_ID = 4242
# Produce, Fetch, Metadata, FindCoordinator, ApiVersions, InitProducerId. Fetch and
# FindCoordinator are never sent: librdkafka enables message format v2 only when Fetch v4+ is
# advertised too, and LZ4 only when FindCoordinator is.
SUPPORTED = {0: (3, 9), 1: (4, 12), 3: (0, 12), 10: (0, 4), 18: (0, 3), 22: (0, 4)}


class GoldenBroker(FakeBroker):
    """The scripted broker with Produce answered and every record set kept for `take()`."""

    def __init__(self) -> None:
        self.record_sets: list[bytes] = []
        handlers = {ApiKey.INIT_PRODUCER_ID: _init_producer_id, ApiKey.PRODUCE: _produce}
        super().__init__(SUPPORTED, {TOPIC: 1}, handlers, cluster_id="golden-cluster")

    def take(self) -> list[bytes]:
        with self.lock:
            taken, self.record_sets = self.record_sets, []
        return taken


def _init_producer_id(broker: GoldenBroker, version: int, request):
    return InitProducerIdResponse(producer_id=PRODUCER_ID, producer_epoch=0)


def _produce(broker: GoldenBroker, version: int, request):
    """Keep each partition's raw records; no answer with acks=0."""
    with broker.lock:
        for topic in request.topic_data:
            broker.record_sets.extend(bytes(p.records) for p in topic.partition_data)
    if request.acks == 0:
        return None
    topic_cls = ProduceResponse.TopicProduceResponse
    return ProduceResponse(
        responses=[
            topic_cls(
                name=topic.name,
                partition_responses=[
                    topic_cls.PartitionProduceResponse(index=p.index, base_offset=0)
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


@pytest.fixture(scope="module")
def broker():
    fake = GoldenBroker()
    yield fake
    fake.stop()


CODEC_NAMES = {
    CompressionType.NONE: "none",
    CompressionType.GZIP: "gzip",
    CompressionType.SNAPPY: "snappy",
    CompressionType.LZ4: "lz4",
    CompressionType.ZSTD: "zstd",
}


def messages(count=300):
    for i in range(count):
        key = None if i % 9 == 4 else b"key-%d" % i
        value = None if i % 50 == 17 else (b"librdkafka value %d " % i) * (i % 7 + 1)
        headers = [("n", str(i).encode()), ("null", None)] if i % 3 == 0 else None
        yield key, value, headers, 1_700_000_000_000 + i


@pytest.mark.timeout(60)
@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_librdkafka_batches_decode(broker, codec, idempotent):
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "compression.type": CODEC_NAMES[codec],
            "enable.idempotence": idempotent,
            "linger.ms": 20,
            "batch.num.messages": 120,
            "message.timeout.ms": 10_000,
            "socket.timeout.ms": 5_000,
        }
    )
    sent = list(messages())
    for key, value, headers, timestamp in sent:
        producer.produce(
            TOPIC, value=value, key=key, headers=headers, partition=0, timestamp=timestamp
        )
    assert producer.flush(20) == 0, "librdkafka did not deliver to the fake broker"
    record_sets = broker.take()
    assert record_sets

    received = []
    sequence = 0
    for record_set in record_sets:
        for header, batch in iter_batches(record_set):
            assert header.compression == codec
            if codec == CompressionType.SNAPPY:  # librdkafka sends raw snappy, not xerial
                assert bytes(batch[HEADER_SIZE : HEADER_SIZE + 8]) != XERIAL_MAGIC
            assert verify_crc(batch, header)
            assert validate_batch(header, batch, check_records=True) is None
            if idempotent:
                assert (header.producer_id, header.producer_epoch) == (PRODUCER_ID, 0)
                assert header.base_sequence == sequence
                sequence += header.records_count
            else:
                assert header.producer_id == -1 and header.base_sequence == -1
            for record in decode_records(batch):
                received.append(
                    (
                        record.key,
                        record.value,
                        record.headers or None,
                        header.base_timestamp + record.timestamp_delta,
                    )
                )
    expected = [
        (k, v, [(n, h) for n, h in headers] if headers else None, t) for k, v, headers, t in sent
    ]
    assert received == expected
