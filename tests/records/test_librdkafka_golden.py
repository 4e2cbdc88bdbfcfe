"""Golden test: record batches written by librdkafka (confluent-kafka) decode with ours.

No broker is needed: a tiny threaded fake on a free loopback port answers ApiVersions,
Metadata, InitProducerId and Produce just enough for librdkafka to send its batches, and keeps
the raw `records` bytes of every Produce request. librdkafka writes plain (non-xerial) snappy,
LZ4 frames and zstd frames of its own, so this checks our codecs against a C implementation.
"""

import socket
import struct
import threading
import uuid

import pytest

from onceflow.log.validator import validate_batch
from onceflow.protocol.headers import encode_response_header, parse_request_header
from onceflow.protocol.messages.api_versions import ApiVersionsResponse
from onceflow.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from onceflow.protocol.messages.metadata import MetadataResponse
from onceflow.protocol.messages.produce import ProduceRequest, ProduceResponse
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


class FakeBroker:
    """Answers just enough of the protocol for a librdkafka producer; records Produce data."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.record_sets: list[bytes] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=5)
        self.listener.close()

    def take(self) -> list[bytes]:
        with self.lock:
            taken, self.record_sets = self.record_sets, []
        return taken

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _read_exact(self, conn: socket.socket, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            try:
                chunk = conn.recv(size - len(data))
            except TimeoutError:
                if self.stopping.is_set():
                    return None
                continue
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        with conn:
            while True:
                size = self._read_exact(conn, 4)
                if size is None:
                    return
                frame = self._read_exact(conn, struct.unpack(">i", size)[0])
                if frame is None:
                    return
                header, body_offset = parse_request_header(frame)
                answer = self._answer(header, memoryview(frame)[body_offset:])
                if answer is not None:
                    payload = answer
                    conn.sendall(struct.pack(">i", len(payload)) + payload)

    def _answer(self, header, body) -> bytes | None:
        key, version = header.request_api_key, header.request_api_version
        flexible_header = True
        if key == 18:
            flexible_header = False  # ApiVersions responses always use header v0
            keys = [
                ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in SUPPORTED.items()
            ]
            if version > SUPPORTED[18][1]:
                response = ApiVersionsResponse(error_code=35, api_keys=keys)
                version = 0
            else:
                response = ApiVersionsResponse(api_keys=keys)
        elif key == 3:
            flexible_header = version >= 9
            partition = MetadataResponse.MetadataResponseTopic.MetadataResponsePartition(
                partition_index=0, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1]
            )
            response = MetadataResponse(
                brokers=[
                    MetadataResponse.MetadataResponseBroker(
                        node_id=1, host="127.0.0.1", port=self.port
                    )
                ],
                cluster_id="golden-cluster",
                controller_id=1,
                topics=[
                    MetadataResponse.MetadataResponseTopic(
                        name=TOPIC, topic_id=uuid.UUID(int=7), partitions=[partition]
                    )
                ],
            )
        elif key == 22:
            flexible_header = version >= 2
            InitProducerIdRequest.decode(body, version)
            response = InitProducerIdResponse(producer_id=PRODUCER_ID, producer_epoch=0)
        elif key == 0:
            flexible_header = version >= 9
            request = ProduceRequest.decode(body, version)
            responses = []
            with self.lock:
                for topic in request.topic_data:
                    for partition in topic.partition_data:
                        self.record_sets.append(bytes(partition.records))
                    responses.append(
                        ProduceResponse.TopicProduceResponse(
                            name=topic.name,
                            partition_responses=[
                                ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
                                    index=p.index, base_offset=0
                                )
                                for p in topic.partition_data
                            ],
                        )
                    )
            if request.acks == 0:
                return None
            response = ProduceResponse(responses=responses)
        else:
            return None
        return encode_response_header(header.correlation_id, flexible_header) + response.encode(
            version
        )


@pytest.fixture(scope="module")
def broker():
    fake = FakeBroker()
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
