"""Bad input against a live broker: each case gets Kafka's answer and leaves the broker whole.

Connection-level cases (malformed frames, oversized frames, unknown api keys, unsupported
versions) are answered the way Kafka's SocketServer answers them: the connection is closed,
with one log line naming the peer; ApiVersions at an unknown version is answered with
UNSUPPORTED_VERSION and a v0 body (KIP-511). Record-level cases (CRC mismatch, wrong magic,
record-count mismatch, client control batch, oversized batch, unknown topic) get Kafka's error
code in the partition response and one log line naming the partition and the client. After
every case a second client, connected since the start, is still served, and the partition's
log end offset has not moved: no part of a rejected request reached the log. Requests are
built with the generated `onceflow.protocol.messages` classes and `onceflow.records.builder`.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from support.broker import BrokerProcess

from onceflow.client.connection import BrokerConnection
from onceflow.client.net.wire import encode_request_header
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages import REQUESTS, RESPONSES
from onceflow.records.batch import MAGIC_OFFSET, RECORDS_COUNT_OFFSET, patch_crc
from onceflow.records.builder import BatchBuilder
from onceflow.records.control import ControlRecordType, build_control_batch

TOPIC = "bad-input"
MESSAGE_MAX_BYTES = 100_000
REQUEST_MAX_BYTES = 1_000_000
PRODUCE_VERSION = 9  # flexible, topics by name
FETCH_VERSION = 12
LOG_WAIT_S = 3.0

ProduceRequest = REQUESTS[ApiKey.PRODUCE]
FetchRequest = REQUESTS[ApiKey.FETCH]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A broker (auto-create off, small limits), its topic and a bystander connection."""
    data_dir = tmp_path_factory.mktemp("bad-input") / "data"
    broker = BrokerProcess(
        data_dir,
        {
            "auto.create.topics.enable": False,
            "message.max.bytes": MESSAGE_MAX_BYTES,
            "socket.request.max.bytes": REQUEST_MAX_BYTES,
        },
    )
    try:
        with BrokerConnection(broker.host, broker.port, client_id="setup") as conn:
            cls = REQUESTS[ApiKey.CREATE_TOPICS]
            created = conn.send(
                cls(
                    topics=[cls.CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)],
                    timeout_ms=10_000,
                )
            )
            assert created.topics[0].error_code == ErrorCode.NONE
        bystander = BrokerConnection(broker.host, broker.port, client_id="bystander").connect()
        yield broker, bystander
        bystander.close()
        assert broker.is_running(), "the broker died during the bad-input tests"
    finally:
        broker.stop()


def _batch(n: int = 3, size: int = 100) -> bytearray:
    builder = BatchBuilder()
    for i in range(n):
        builder.append(None, b"k%d" % i, bytes([65 + i % 26]) * size)
    return builder.build()


def _produce(conn: BrokerConnection, records: bytes, topic: str = TOPIC):
    """Send one Produce (acks=all) and return the partition response."""
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
                ],
            )
        ],
    )
    response = conn.send(request, PRODUCE_VERSION)
    return response.responses[0].partition_responses[0]


def _fetch(conn: BrokerConnection, offset: int, topic: str = TOPIC):
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=10_000_000,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=offset, partition_max_bytes=5_000_000
                    )
                ],
            )
        ],
    )
    return conn.send(request, FETCH_VERSION).responses[0].partitions[0]


def _log_end_offset(conn: BrokerConnection) -> int:
    return _fetch(conn, 0).high_watermark


def _wait_for_log(broker: BrokerProcess, start: int, *needles: str) -> str:
    """New broker log text since `start` once it contains every needle (or after a timeout)."""
    deadline = time.monotonic() + LOG_WAIT_S
    while True:
        text = broker.log_text()[start:]
        if all(n.lower() in text.lower() for n in needles) or time.monotonic() > deadline:
            return text


def _assert_still_serving(broker: BrokerProcess, bystander: BrokerConnection) -> None:
    assert broker.is_running()
    versions = REQUESTS[ApiKey.API_VERSIONS]
    response = bystander.send(
        versions(client_software_name="bystander", client_software_version="1.0"), 3
    )
    assert response.error_code == ErrorCode.NONE
    assert any(k.api_key == ApiKey.PRODUCE for k in response.api_keys)


# ---------------------------------------------------------------------- connection level


def _raw_socket(broker: BrokerProcess) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=5)


def _closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True when the broker closes the connection without sending anything."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _header(api_key: int, version: int, correlation_id: int = 7, flexible: bool = False) -> bytes:
    return encode_request_header(api_key, version, correlation_id, "bad-client", flexible)


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


CLOSE_CASES = {
    # name: (bytes to send, words the broker's log line must contain)
    "frame shorter than a request header": (_frame(b"\x00\x03\x00"), "malformed request header"),
    "client id longer than the frame": (
        _frame(struct.pack(">hhih", 18, 0, 1, 500) + b"ab"),
        "malformed request header",
    ),
    "frame over socket.request.max.bytes": (
        struct.pack(">i", REQUEST_MAX_BYTES + 1) + b"\x00" * 64,
        "socket.request.max.bytes",
    ),
    "negative frame size": (struct.pack(">i", -5), "negative request size"),
    "unknown api key": (_frame(_header(9999, 0) + b"\x00" * 8), "key 9999"),
    "unsupported Produce version": (_frame(_header(0, 99) + b"\x00" * 8), "version 99"),
    "truncated Metadata body": (_frame(_header(3, 4) + b"\x00\x00\x00\x05\x00"), "Metadata"),
}


@pytest.mark.parametrize("case", list(CLOSE_CASES))
def test_malformed_requests_close_the_connection_with_one_log_line(live, case):
    broker, bystander = live
    payload, needle = CLOSE_CASES[case]
    log_start = len(broker.log_text())
    with _raw_socket(broker) as sock:
        host, port = sock.getsockname()[:2]
        peer = f"{host}:{port}"
        sock.sendall(payload)
        assert _closed_by_peer(sock), f"{case}: the broker kept the connection open"
    text = _wait_for_log(broker, log_start, peer, needle)
    lines = [line for line in text.splitlines() if peer in line]
    assert len(lines) == 1, f"{case}: expected one log line for {peer}, got:\n{text}"
    assert needle.lower() in lines[0].lower()
    assert "Traceback" not in text
    _assert_still_serving(broker, bystander)


def test_truncated_frame_then_eof_is_dropped_quietly(live):
    broker, bystander = live
    with _raw_socket(broker) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00" * 20)
        sock.shutdown(socket.SHUT_WR)
        assert _closed_by_peer(sock)
    _assert_still_serving(broker, bystander)


def test_api_versions_at_an_unknown_version_gets_unsupported_version_and_v0_body(live):
    broker, bystander = live
    with _raw_socket(broker) as sock:
        # ApiVersions v3+ uses request header v2, so v99 does too
        sock.sendall(_frame(_header(ApiKey.API_VERSIONS, 99, correlation_id=42, flexible=True)))
        sock.settimeout(5)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack_from(">i", body)[0] == 42  # response header v0
    response = RESPONSES[ApiKey.API_VERSIONS].decode(memoryview(body)[4:], 0)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert any(k.api_key == ApiKey.API_VERSIONS and k.max_version >= 3 for k in response.api_keys)
    _assert_still_serving(broker, bystander)


# ---------------------------------------------------------------------- record level


def _crc_mismatch() -> bytes:
    batch = _batch()
    batch[-5] ^= 0xFF  # inside the last record; the CRC no longer matches
    return bytes(batch)


def _wrong_magic() -> bytes:
    batch = _batch()
    batch[MAGIC_OFFSET] = 1  # the CRC does not cover the magic byte
    return bytes(batch)


def _count_mismatch() -> bytes:
    batch = _batch(n=3)
    struct.pack_into(">i", batch, RECORDS_COUNT_OFFSET, 5)
    patch_crc(batch)  # a valid CRC over a lying header
    return bytes(batch)


def _control_batch() -> bytes:
    return bytes(build_control_batch(4242, 0, ControlRecordType.COMMIT, 0, int(time.time() * 1000)))


def _too_large() -> bytes:
    return bytes(_batch(n=2, size=MESSAGE_MAX_BYTES))


def _good_then_corrupt() -> bytes:
    return bytes(_batch()) + _crc_mismatch()


RECORD_CASES = {
    # name: (records, Kafka's error codes for it)
    "CRC mismatch": (_crc_mismatch, {ErrorCode.CORRUPT_MESSAGE}),
    # Kafka's ProduceRequest.validateRecords (v3+): exactly one batch per partition, and it
    # must have magic 2 -- INVALID_RECORD otherwise, before any CRC check
    "two batches, the second corrupt": (_good_then_corrupt, {ErrorCode.INVALID_RECORD}),
    "wrong magic": (_wrong_magic, {ErrorCode.INVALID_RECORD}),
    # Kafka's DefaultRecordBatch iterator: INVALID_RECORD (CORRUPT_MESSAGE before 2.x)
    "record count mismatch": (
        _count_mismatch,
        {ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE},
    ),
    "control batch from a client": (_control_batch, {ErrorCode.INVALID_RECORD}),
    "batch over message.max.bytes": (_too_large, {ErrorCode.MESSAGE_TOO_LARGE}),
}


@pytest.mark.parametrize("case", list(RECORD_CASES))
def test_bad_batches_get_kafkas_error_code_and_never_reach_the_log(live, case):
    broker, bystander = live
    make_records, expected = RECORD_CASES[case]
    with BrokerConnection(broker.host, broker.port, client_id="producer") as conn:
        assert _produce(conn, bytes(_batch())).error_code == ErrorCode.NONE
        end_before = _log_end_offset(conn)
        log_start = len(broker.log_text())
        response = _produce(conn, make_records())
        code = ErrorCode(response.error_code)
        assert code in expected, f"{case}: got {code.name}, Kafka answers {expected}"
        peer = conn.local_address
        text = _wait_for_log(broker, log_start, peer, f"{TOPIC}-0")
        lines = [line for line in text.splitlines() if peer in line]
        assert len(lines) == 1, f"{case}: expected one log line for {peer}, got:\n{text}"
        assert f"{TOPIC}-0" in lines[0] and "rejected" in lines[0]
        assert "Traceback" not in text
        assert _log_end_offset(conn) == end_before
        # the connection is still usable and the partition still takes good batches
        good = _produce(conn, bytes(_batch()))
        assert good.error_code == ErrorCode.NONE
        assert good.base_offset == end_before
    _assert_still_serving(broker, bystander)


def test_produce_and_metadata_for_an_unknown_topic_with_auto_create_off(live):
    broker, bystander = live
    with BrokerConnection(broker.host, broker.port, client_id="producer") as conn:
        response = _produce(conn, bytes(_batch()), topic="no-such-topic")
        assert response.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        metadata_cls = REQUESTS[ApiKey.METADATA]
        metadata = conn.send(
            metadata_cls(
                topics=[metadata_cls.MetadataRequestTopic(name="no-such-topic")],
                allow_auto_topic_creation=True,  # asked for, but the broker config forbids it
            )
        )
        assert [(t.name, t.error_code) for t in metadata.topics] == [
            ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        ]
    _assert_still_serving(broker, bystander)


@pytest.mark.parametrize("offset_kind", ["past the end", "negative"])
def test_fetch_out_of_range_offset(live, offset_kind):
    broker, bystander = live
    with BrokerConnection(broker.host, broker.port, client_id="consumer") as conn:
        end = _log_end_offset(conn)
        offset = end + 1000 if offset_kind == "past the end" else -5
        partition = _fetch(conn, offset)
        assert partition.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert not partition.records
        assert _fetch(conn, 0).error_code == ErrorCode.NONE
    _assert_still_serving(broker, bystander)


def test_only_whole_valid_batches_are_in_the_log(live):
    """Read the partition back: every batch is one the tests sent as valid (3 records)."""
    from onceflow.records.batch import iter_batches, verify_crc

    broker, bystander = live
    with BrokerConnection(broker.host, broker.port, client_id="reader") as conn:
        end = _log_end_offset(conn)
        offset, batches = 0, 0
        while offset < end:
            records = _fetch(conn, offset).records
            assert records
            for header, batch in iter_batches(records):
                assert verify_crc(batch, header)
                assert header.records_count == 3 and not header.is_control
                assert header.base_offset == offset
                offset = header.last_offset + 1
                batches += 1
        assert offset == end
    _assert_still_serving(broker, bystander)
