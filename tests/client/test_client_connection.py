"""BrokerConnection against a scripted fake broker: version negotiation, headers, failures.

The fake broker parses real request headers with `onceflow.protocol.headers` and answers with
generated response classes, so these tests run without the real broker and can script what a
real broker rarely does (an old ApiVersions range, a wrong correlation id, silence).
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading

import pytest

from onceflow.client.connection import BrokerConnection, connect_bootstrap
from onceflow.client.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_error,
)
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import encode_response_header, parse_request_header
from onceflow.protocol.messages import REQUESTS, RESPONSES


class FakeBroker(socketserver.ThreadingTCPServer):
    """Answers ApiVersions from `versions` and Metadata with one broker; records requests."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, versions: dict[int, tuple[int, int]], behaviour: str = "normal"):
        super().__init__(("127.0.0.1", 0), _FakeHandler)
        self.versions = versions
        self.behaviour = behaviour  # normal | wrong-correlation | close | silent
        self.seen: list[tuple[int, int, int, str | None]] = []
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _FakeHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: FakeBroker = self.server  # type: ignore[assignment]
        sock: socket.socket = self.request
        while True:
            size_bytes = sock.recv(4, socket.MSG_WAITALL)
            if len(size_bytes) < 4:
                return
            frame = sock.recv(struct.unpack(">i", size_bytes)[0], socket.MSG_WAITALL)
            header, body_offset = parse_request_header(frame)
            key, version = header.request_api_key, header.request_api_version
            server.seen.append((key, version, header.header_version, header.client_id))
            REQUESTS[key].decode(memoryview(frame)[body_offset:], version)  # must be valid
            if key != ApiKey.API_VERSIONS and server.behaviour != "normal":
                if server.behaviour == "close":
                    return
                if server.behaviour == "silent":
                    sock.recv(1)  # wait until the client gives up
                    return
            correlation_id = header.correlation_id
            if server.behaviour == "wrong-correlation" and key != ApiKey.API_VERSIONS:
                correlation_id += 1
            body, flexible_header = self._answer(server, key, version)
            out = encode_response_header(correlation_id, flexible_header) + body
            sock.sendall(struct.pack(">i", len(out)) + out)

    def _answer(self, server: FakeBroker, key: int, version: int) -> tuple[bytes, bool]:
        response_cls = RESPONSES[key]
        if key == ApiKey.API_VERSIONS:
            ours = server.versions[ApiKey.API_VERSIONS]
            entries = [
                response_cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in server.versions.items()
            ]
            if version > ours[1]:  # KIP-511: error plus our range, in a v0 body
                response = response_cls(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=entries)
                return response.encode(0), False
            return response_cls(error_code=0, api_keys=entries).encode(version), False
        if key == ApiKey.METADATA:
            response = response_cls(
                brokers=[response_cls.MetadataResponseBroker(node_id=1, host="h", port=1)],
                cluster_id="fake",
                controller_id=1,
                topics=[],
            )
            flexible = (
                response_cls.FLEXIBLE_MIN is not None and version >= response_cls.FLEXIBLE_MIN
            )
            return response.encode(version), flexible
        raise AssertionError(f"fake broker got api key {key}")


@pytest.fixture
def fake():
    brokers: list[FakeBroker] = []

    def start(versions=None, behaviour="normal") -> FakeBroker:
        versions = versions or {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12)}
        broker = FakeBroker(versions, behaviour)
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.stop()


def _metadata():
    return REQUESTS[ApiKey.METADATA](topics=[])


def test_negotiates_the_highest_common_version_and_uses_flexible_headers(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (1, 10)})
    with BrokerConnection("127.0.0.1", broker.port, client_id="me") as conn:
        assert conn.api_version(ApiKey.METADATA) == 10
        response = conn.send(_metadata())
    assert response.cluster_id == "fake"
    # ApiVersions v4, refused, then v3 (flexible: header v2); Metadata v10 (flexible: header v2)
    assert broker.seen == [
        (ApiKey.API_VERSIONS, 4, 2, "me"),
        (ApiKey.API_VERSIONS, 3, 2, "me"),
        (ApiKey.METADATA, 10, 2, "me"),
    ]


def test_non_flexible_versions_use_header_v1(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 5)})
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        assert conn.send(_metadata()).controller_id == 1
    assert broker.seen[-1][:3] == (ApiKey.METADATA, 5, 1)


def test_falls_back_when_the_broker_does_not_know_our_api_versions_version(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 9)})
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        assert conn.broker_versions[ApiKey.METADATA] == (0, 9)
    ours = REQUESTS[ApiKey.API_VERSIONS].VALID_VERSIONS[1]
    assert [(k, v) for k, v, _, _ in broker.seen] == [
        (ApiKey.API_VERSIONS, ours),
        (ApiKey.API_VERSIONS, 2),
    ]


def test_an_api_the_broker_lacks_or_a_disjoint_range_is_unsupported(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (50, 60)})
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        with pytest.raises(UnsupportedVersionError, match="broker versions 50-60"):
            conn.api_version(ApiKey.METADATA)
        with pytest.raises(UnsupportedVersionError, match="does not support PRODUCE"):
            conn.api_version(ApiKey.PRODUCE)


def test_correlation_id_mismatch_is_detected(fake):
    broker = fake(behaviour="wrong-correlation")
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        with pytest.raises(BrokerResponseError, match="correlation id"):
            conn.send(_metadata())


def test_broker_closing_mid_request_raises_connection_error(fake):
    broker = fake(behaviour="close")
    conn = BrokerConnection("127.0.0.1", broker.port).connect()
    with pytest.raises(KafkaConnectionError, match="closed"):
        conn.send(_metadata())
    assert not conn.connected


def test_silent_broker_times_out(fake):
    broker = fake(behaviour="silent")
    conn = BrokerConnection("127.0.0.1", broker.port, request_timeout_ms=300).connect()
    with pytest.raises(KafkaTimeoutError, match="300 ms"):
        conn.send(_metadata())
    conn.close()


def test_connect_bootstrap_skips_unreachable_brokers(fake):
    broker = fake()
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    conn = connect_bootstrap(f"127.0.0.1:{dead}, 127.0.0.1:{broker.port}")
    assert conn.port == broker.port
    conn.close()
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{dead}"):
        connect_bootstrap(f"127.0.0.1:{dead}")
    with pytest.raises(ValueError, match="host:port"):
        connect_bootstrap("nohost")


def test_typed_errors_are_named_after_kafkas():
    err = error_for_code(ErrorCode.TOPIC_ALREADY_EXISTS, "t")
    assert isinstance(err, TopicAlreadyExistsError)
    assert str(err) == "TOPIC_ALREADY_EXISTS: t"
    assert not err.retriable
    assert error_for_code(3).retriable
    assert type(error_for_code(17)).__name__ == "InvalidTopicError"
    assert "error code 30000" in str(error_for_code(30000))
    with pytest.raises(UnknownTopicOrPartitionError):
        raise_for_error(3)
    raise_for_error(0)
