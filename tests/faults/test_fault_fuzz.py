"""Hypothesis fuzzing of the request decoder and of a live broker.

Inputs are random bytes and mutations (bit flips, truncations, insertions, overwritten spans) of
valid Produce, Fetch and Metadata request frames built with the generated message classes.

- Decoder: `parse_request_header` and `REQUESTS[key].decode` either succeed or raise
  `DecodeError`; nothing else escapes.
- Live broker: each input is sent on a fresh connection, followed by a valid ApiVersions probe;
  the broker must answer the probe or close the connection (a mutated Fetch may legitimately
  park the probe behind a long max_wait_ms, so a slow probe alone is not a failure). After every
  input a second, long-lived connection must still get an ApiVersions answer, and the broker
  process must be alive at the end.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.broker import BrokerProcess

from onceflow.client.connection import BrokerConnection
from onceflow.client.net.wire import encode_request_header
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import parse_request_header
from onceflow.protocol.messages import REQUESTS
from onceflow.records.builder import BatchBuilder

PROBE_CORRELATION_ID = 0x7EADBEEF
TOPIC = "fuzz"


def _produce_body(version: int) -> bytes:
    cls = REQUESTS[ApiKey.PRODUCE]
    builder = BatchBuilder()
    for i in range(3):
        builder.append(1_700_000_000_000 + i, b"key", b"value %d" % i)
    return cls(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            cls.TopicProduceData(
                name=TOPIC,
                partition_data=[
                    cls.TopicProduceData.PartitionProduceData(
                        index=0, records=bytes(builder.build())
                    )
                ],
            )
        ],
    ).encode(version)


def _fetch_body(version: int) -> bytes:
    cls = REQUESTS[ApiKey.FETCH]
    return cls(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1_000_000,
        topics=[
            cls.FetchTopic(
                topic=TOPIC,
                partitions=[
                    cls.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=100_000
                    )
                ],
            )
        ],
    ).encode(version)


def _metadata_body(version: int) -> bytes:
    cls = REQUESTS[ApiKey.METADATA]
    return cls(topics=[cls.MetadataRequestTopic(name=TOPIC)]).encode(version)


# (api key, version, body): flexible and non-flexible versions of each
VALID = [
    (ApiKey.PRODUCE, 3, _produce_body(3)),
    (ApiKey.PRODUCE, 9, _produce_body(9)),
    (ApiKey.FETCH, 4, _fetch_body(4)),
    (ApiKey.FETCH, 12, _fetch_body(12)),
    (ApiKey.METADATA, 1, _metadata_body(1)),
    (ApiKey.METADATA, 12, _metadata_body(12)),
]


def _request_payload(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    flexible = (
        REQUESTS[api_key].FLEXIBLE_MIN is not None and version >= REQUESTS[api_key].FLEXIBLE_MIN
    )
    return encode_request_header(api_key, version, correlation_id, "fuzz", flexible) + body


@st.composite
def mutated(draw, payload: bytes) -> bytes:
    """A mutation of `payload`: flips, truncation, insertion or an overwritten span."""
    data = bytearray(payload)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "overwrite"]))
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        else:
            chunk = draw(st.binary(min_size=1, max_size=8))
            data[pos : pos + len(chunk)] = chunk
    return bytes(data)


@st.composite
def request_payloads(draw) -> bytes:
    """A request payload (header + body, no size prefix): random or a mutated valid one."""
    if draw(st.integers(0, 3)) == 0:
        return draw(st.binary(min_size=0, max_size=200))
    api_key, version, body = draw(st.sampled_from(VALID))
    return draw(mutated(_request_payload(api_key, version, body)))


# ---------------------------------------------------------------------- decoder


@settings(max_examples=1000, deadline=None)
@given(payload=request_payloads())
def test_decoder_raises_only_decode_error(payload):
    try:
        header, body_offset = parse_request_header(payload)
    except DecodeError:
        return
    cls = REQUESTS.get(header.request_api_key)
    if cls is None:
        return
    low, high = cls.VALID_VERSIONS
    if not low <= header.request_api_version <= high:
        return
    try:
        cls.decode(memoryview(payload)[body_offset:], header.request_api_version)
    except DecodeError:
        pass


@pytest.mark.parametrize(("api_key", "version", "body"), VALID, ids=lambda v: str(v)[:12])
def test_valid_bodies_round_trip(api_key, version, body):
    """The fuzzer's seeds are themselves valid: they decode and re-encode to the same bytes."""
    decoded = REQUESTS[api_key].decode(memoryview(body), version)
    assert decoded.encode(version) == body


# ---------------------------------------------------------------------- live broker


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    broker = BrokerProcess(
        tmp_path_factory.mktemp("fuzz") / "data",
        {"socket.request.max.bytes": 1_000_000, "message.max.bytes": 100_000},
    )
    try:
        bystander = BrokerConnection(broker.host, broker.port, client_id="bystander").connect()
        yield broker, bystander
        bystander.close()
    finally:
        broker.stop()


def _probe_frame() -> bytes:
    payload = _request_payload(
        ApiKey.API_VERSIONS, 0, REQUESTS[ApiKey.API_VERSIONS]().encode(0), PROBE_CORRELATION_ID
    )
    return struct.pack(">i", len(payload)) + payload


def _send_and_watch(broker: BrokerProcess, frame: bytes, timeout: float = 0.5) -> str:
    """Send a frame then the probe; 'answered', 'closed' or 'slow'."""
    with socket.create_connection((broker.host, broker.port), timeout=5) as sock:
        try:
            sock.sendall(frame + _probe_frame())
        except (BrokenPipeError, ConnectionResetError):
            return "closed"
        sock.settimeout(timeout)
        received = b""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                chunk = sock.recv(65536)
                if not chunk:
                    return "closed"
                received += chunk
                while len(received) >= 8:
                    size, correlation_id = struct.unpack_from(">ii", received)
                    if correlation_id == PROBE_CORRELATION_ID:
                        return "answered"
                    if len(received) < 4 + size:
                        break
                    received = received[4 + size :]
        except ConnectionResetError:
            return "closed"
        except TimeoutError:
            pass
    return "slow"


@pytest.mark.slow
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(payload=request_payloads())
def test_live_broker_survives_fuzzed_frames(fuzz_broker, payload):
    broker, bystander = fuzz_broker
    frame = struct.pack(">i", len(payload)) + payload
    _send_and_watch(broker, frame)
    assert broker.is_running(), f"broker died after {payload!r}"
    probe = REQUESTS[ApiKey.API_VERSIONS](
        client_software_name="bystander", client_software_version="1.0"
    )
    response = bystander.send(probe, 3)
    assert response.error_code == ErrorCode.NONE
