"""Unit tests of the fault-injecting proxy (tests/support/proxy.py) against a trivial frame server.

The frame server answers every Kafka-framed request with a response frame carrying the request's
correlation id and api key, and records what it received, so each test can tell whether a
request reached the "broker" and whether its response reached the client.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading

import pytest
from support.proxy import KafkaProxy

PRODUCE, FETCH, METADATA = 0, 1, 3


class _FrameHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            size_bytes = _recv_exactly(sock, 4)
            if size_bytes is None:
                return
            (size,) = struct.unpack(">i", size_bytes)
            body = _recv_exactly(sock, size)
            if body is None:
                return
            api_key, _version, correlation_id = struct.unpack_from(">hhi", body)
            with self.server.lock:  # type: ignore[attr-defined]
                self.server.received.append((api_key, correlation_id))  # type: ignore[attr-defined]
            payload = struct.pack(">ih", correlation_id, api_key)
            sock.sendall(struct.pack(">i", len(payload)) + payload)


class _FrameServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _FrameHandler)
        self.lock = threading.Lock()
        self.received: list[tuple[int, int]] = []


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _request(api_key: int, correlation_id: int) -> bytes:
    body = struct.pack(">hhi", api_key, 0, correlation_id) + struct.pack(">h", 0) + b"payload"
    return struct.pack(">i", len(body)) + body


def _read_response(sock: socket.socket) -> tuple[int, int] | None:
    """(correlation_id, api_key) of the next response, or None if the proxy closed the socket."""
    try:
        size_bytes = _recv_exactly(sock, 4)
    except ConnectionResetError:
        return None
    if size_bytes is None:
        return None
    (size,) = struct.unpack(">i", size_bytes)
    body = _recv_exactly(sock, size)
    if body is None:
        return None
    return struct.unpack(">ih", body)


@pytest.fixture
def frame_server():
    server = _FrameServer()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(frame_server):
    host, port = frame_server.server_address
    with KafkaProxy(host, port) as p:
        yield p


def _connect(proxy: KafkaProxy) -> socket.socket:
    sock = socket.create_connection((proxy.host, proxy.port), timeout=5)
    return sock


def test_pass_through_relays_every_request_and_response(proxy, frame_server):
    with _connect(proxy) as sock:
        for cid, key in enumerate([METADATA, PRODUCE, FETCH, PRODUCE]):
            sock.sendall(_request(key, cid))
            assert _read_response(sock) == (cid, key)
    seen, cut = proxy.counts()
    assert seen == {METADATA: 1, PRODUCE: 2, FETCH: 1}
    assert cut == {}
    assert frame_server.received == [(METADATA, 0), (PRODUCE, 1), (FETCH, 2), (PRODUCE, 3)]


def test_cut_nth_forwards_the_request_but_never_relays_its_response(proxy, frame_server):
    proxy.cut_nth(PRODUCE, 2)
    with _connect(proxy) as sock:
        sock.sendall(_request(PRODUCE, 10))
        assert _read_response(sock) == (10, PRODUCE)
        sock.sendall(_request(METADATA, 11))  # other api keys do not count towards nth
        assert _read_response(sock) == (11, METADATA)
        sock.sendall(_request(PRODUCE, 12))
        assert _read_response(sock) is None  # cut: connection closed, no response
    # the cut request did reach the server: it took effect
    assert (PRODUCE, 12) in frame_server.received
    assert proxy.counts()[1] == {PRODUCE: 1}
    # one-shot: a new connection passes through again
    with _connect(proxy) as sock:
        sock.sendall(_request(PRODUCE, 13))
        assert _read_response(sock) == (13, PRODUCE)


def test_cut_relays_earlier_pipelined_responses_and_drops_later_requests(proxy, frame_server):
    proxy.cut_nth(FETCH, 1)
    with _connect(proxy) as sock:
        sock.sendall(_request(PRODUCE, 1) + _request(FETCH, 2) + _request(PRODUCE, 3))
        assert _read_response(sock) == (1, PRODUCE)
        assert _read_response(sock) is None
    assert (FETCH, 2) in frame_server.received
    assert (PRODUCE, 3) not in frame_server.received  # nothing after the cut is forwarded


@pytest.mark.parametrize("probability", [0.0, 0.3, 1.0])
def test_cut_randomly_is_seeded_and_counts(frame_server, probability):
    def run() -> tuple[list[bool], dict[int, int]]:
        host, port = frame_server.server_address
        outcomes = []
        with KafkaProxy(host, port) as p:
            p.cut_randomly(probability, seed=7, api_keys={PRODUCE})
            sock = _connect(p)
            for cid in range(40):
                sock.sendall(_request(PRODUCE, cid))
                answered = _read_response(sock) is not None
                outcomes.append(answered)
                if not answered:
                    sock.close()
                    sock = _connect(p)
            sock.close()
            return outcomes, p.counts()[1]

    first, cut = run()
    second, _ = run()
    assert first == second  # same seed, same faults
    assert cut.get(PRODUCE, 0) == first.count(False)
    if probability == 0.0:
        assert all(first)
    elif probability == 1.0:
        assert not any(first)
    else:
        assert 0 < first.count(False) < 40


def test_stop_closes_the_listener(frame_server):
    host, port = frame_server.server_address
    p = KafkaProxy(host, port).start()
    proxy_port = p.port
    sock = _connect(p)
    p.stop()
    assert _read_response(sock) is None
    sock.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy_port), timeout=2).close()


def test_upstream_can_be_set_after_start(frame_server):
    with KafkaProxy() as p:
        with _connect(p) as sock:  # no upstream yet: the connection is closed
            assert _read_response(sock) is None
        p.set_upstream(*frame_server.server_address)
        with _connect(p) as sock:
            sock.sendall(_request(METADATA, 5))
            assert _read_response(sock) == (5, METADATA)
