"""The connection layer against a real broker process, over raw sockets: pipelining, framing
limits, malformed input, unsupported APIs and versions, acks=0."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from broker.broker_helpers import make_batch, produce_request
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import RequestHeader, encode_request_frame
from onceflow.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from onceflow.protocol.messages.fetch import FetchRequest, FetchResponse
from onceflow.protocol.messages.metadata import MetadataRequest, MetadataResponse

pytestmark = pytest.mark.timeout(60)


def connect(broker) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def frame(api_key, version, correlation_id, request) -> bytes:
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id="raw-test",
    )
    return encode_request_frame(header, request)


def recv_exact(sock, n) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def recv_frame(sock) -> tuple[int, bytes]:
    """(correlation id, rest of the response after the correlation id)."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    body = recv_exact(sock, size)
    return struct.unpack(">i", body[:4])[0], body[4:]


def assert_closed(sock):
    sock.settimeout(10)
    try:
        assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


def wait_for_log(broker, text, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in broker.log_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in broker log:\n{broker.log_text()}")


def fetch_request(topic, offset, max_wait_ms):
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[partition])],
    )


def test_pipelined_responses_come_back_in_request_order(broker):
    with connect(broker) as sock:
        # create the topic first (metadata auto-create), then pipeline: a fetch that long-polls
        # for 600 ms, a metadata request and an ApiVersions that finish at once
        sock.sendall(
            frame(
                ApiKey.METADATA,
                12,
                1,
                MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="pipe")]),
            )
        )
        recv_frame(sock)
        started = time.monotonic()
        sock.sendall(
            frame(ApiKey.FETCH, 12, 10, fetch_request("pipe", 0, 600))
            + frame(ApiKey.METADATA, 12, 11, MetadataRequest(topics=None))
            + frame(
                ApiKey.API_VERSIONS,
                3,
                12,
                ApiVersionsRequest(client_software_name="t", client_software_version="1"),
            )
        )
        ids = []
        bodies = []
        for _ in range(3):
            correlation_id, body = recv_frame(sock)
            ids.append(correlation_id)
            bodies.append(body)
        assert ids == [10, 11, 12]
        assert time.monotonic() - started >= 0.5  # the fetch really long-polled first
        fetch = FetchResponse.decode(bodies[0][1:], 12)  # skip the empty tagged fields
        assert fetch.responses[0].partitions[0].error_code == 0
        metadata = MetadataResponse.decode(bodies[1][1:], 12)
        assert [t.name for t in metadata.topics] == ["pipe"]
        versions = ApiVersionsResponse.decode(bodies[2], 3)  # response header v0
        assert versions.error_code == 0


def test_oversized_frame_closes_connection_with_one_log_line(broker_factory):
    broker = broker_factory({"socket.request.max.bytes": 1000})
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", 5000) + b"\x00" * 100)
        assert_closed(sock)
    wait_for_log(broker, "exceeds socket.request.max.bytes=1000")
    assert broker.log_text().count("closing connection from") == 1


def test_malformed_header_closes_connection(broker):
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", 3) + b"\x00\x03\x00")
        assert_closed(sock)
    wait_for_log(broker, "malformed request header")


def test_malformed_body_closes_connection(broker):
    header = RequestHeader(
        request_api_key=ApiKey.METADATA, request_api_version=1, correlation_id=1, client_id="x"
    ).encode()
    payload = header + b"\x00\x00\x00\x05"  # five topics announced, none present
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert_closed(sock)
    wait_for_log(broker, "malformed METADATA v1 request")


@pytest.mark.parametrize(
    ("api_key", "version"), [(9999, 0), (ApiKey.METADATA, 99), (ApiKey.ALTER_REPLICA_LOG_DIRS, 1)]
)
def test_unsupported_api_or_version_closes_connection(broker, api_key, version):
    header = struct.pack(">hhih", api_key, version, 7, 1) + b"x\x00"  # + empty tagged fields
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        assert_closed(sock)
    wait_for_log(broker, f"version {version}")


def test_api_versions_unknown_version_answers_v0_with_the_table(broker):
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 42, 1) + b"x" + b"\x00" * 4
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", len(header)) + header)
        correlation_id, body = recv_frame(sock)
        response = ApiVersionsResponse.decode(body, 0)
        assert correlation_id == 42
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert keys[ApiKey.API_VERSIONS] == (0, 4)
        # the connection stays usable, and the client retries with a version it can use
        sock.sendall(frame(ApiKey.API_VERSIONS, 0, 43, ApiVersionsRequest()))
        assert recv_frame(sock)[0] == 43


def produce(topic, acks, records):
    return produce_request(topic, {0: records}, acks=acks, timeout_ms=1000)


def test_acks_zero_produce_sends_no_response(broker):
    with connect(broker) as sock:
        sock.sendall(
            frame(
                ApiKey.METADATA,
                12,
                1,
                MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="z")]),
            )
        )
        recv_frame(sock)
        sock.sendall(
            frame(ApiKey.PRODUCE, 9, 2, produce("z", 0, bytes(make_batch([b"a"]))))
            + frame(ApiKey.API_VERSIONS, 0, 3, ApiVersionsRequest())
        )
        assert recv_frame(sock)[0] == 3
        # the acks=0 data becomes visible
        deadline = time.monotonic() + 5
        while True:
            sock.sendall(frame(ApiKey.FETCH, 12, 4, fetch_request("z", 0, 100)))
            _, body = recv_frame(sock)
            part = FetchResponse.decode(body[1:], 12).responses[0].partitions[0]
            if part.high_watermark == 1 or time.monotonic() > deadline:
                break
        assert part.high_watermark == 1


def test_acks_zero_produce_error_closes_connection(broker):
    with connect(broker) as sock:
        sock.sendall(frame(ApiKey.PRODUCE, 9, 2, produce("missing", 0, bytes(make_batch([b"a"])))))
        assert_closed(sock)
    wait_for_log(broker, "acks=0 produce failed")


def test_sigterm_answers_in_flight_long_poll_then_exits_cleanly(broker):
    with connect(broker) as sock:
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="s")])
        sock.sendall(frame(ApiKey.METADATA, 12, 1, request))
        recv_frame(sock)
        sock.sendall(frame(ApiKey.FETCH, 12, 2, fetch_request("s", 0, 30_000)))
        time.sleep(0.3)  # the fetch is now long-polling
        started = time.monotonic()
        broker.proc.terminate()
        correlation_id, body = recv_frame(sock)
        assert correlation_id == 2
        assert FetchResponse.decode(body[1:], 12).responses[0].partitions[0].error_code == 0
        assert_closed(sock)
    assert broker.proc.wait(15) == 0
    assert time.monotonic() - started < 10
    assert (broker.data_dir / ".clean_shutdown").exists()
