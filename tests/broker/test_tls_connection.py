"""`TlsClientConnection`'s receive buffer (the transport decrypts into it): whatever the read
sizes, every frame comes out whole and in order, exactly as `ClientConnection.data_received`
cuts them; a frame larger than the buffer makes it grow to hold the whole frame; the memory of
a large frame is given back once the buffer is empty; a view the transport still holds while
`buffer_updated` runs (asyncio's and uvloop's TLS transports do) never makes a resize fail.

Frames are recorded instead of dispatched; no broker, no socket."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.broker.config import BrokerConfig
from onceflow.broker.connection import (
    _TLS_BUFFER_KEPT,
    _TLS_READ_MIN,
    ClientConnection,
    TlsClientConnection,
)


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 5555), "sslcontext": object()}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


def _recording(cls):
    class Recording(cls):
        def __init__(self) -> None:
            state = SimpleNamespace(config=BrokerConfig({}), metrics=None)
            super().__init__(state)
            self.frames: list[bytes] = []
            self.connection_made(_Transport())

        def _handle_frame(self, frame: bytearray) -> None:
            self.frames.append(bytes(frame))

    return Recording()


def _stream(sizes: list[int]) -> tuple[bytes, list[bytes]]:
    frames = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    return b"".join(struct.pack(">i", len(f)) + f for f in frames), frames


def feed_tls(connection: TlsClientConnection, data: bytes, reads: list[int]) -> None:
    """Deliver `data` as a TLS transport does: get_buffer, fill part of it, buffer_updated
    while still holding the view."""
    pos, i = 0, 0
    while pos < len(data):
        view = connection.get_buffer(-1)
        assert len(view) >= 1
        n = min(len(view), len(data) - pos, reads[i % len(reads)] if reads else len(data))
        view[:n] = data[pos : pos + n]
        pos += n
        i += 1
        connection.buffer_updated(n)  # the transport's view is still alive here
        del view


sizes = st.lists(
    st.one_of(st.integers(0, 300), st.integers(300, 70_000), st.just(3 * _TLS_READ_MIN + 5)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(sizes=sizes, reads=st.lists(st.integers(2_000, 600_000), min_size=1, max_size=8))
def test_frames_come_out_whole_and_in_order_whatever_the_reads(sizes, reads):
    data, frames = _stream(sizes)
    tls = _recording(TlsClientConnection)
    feed_tls(tls, data, reads)
    assert tls.frames == frames
    plain = _recording(ClientConnection)  # the reference: the bytes-per-read path
    for start in range(0, len(data), reads[0]):
        plain.data_received(data[start : start + reads[0]])
    assert plain.frames == tls.frames


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=8),
    reads=st.lists(st.integers(1, 50), min_size=1, max_size=8),
)
def test_small_frames_in_tiny_reads(sizes, reads):
    data, frames = _stream(sizes)
    tls = _recording(TlsClientConnection)
    feed_tls(tls, data, reads)
    assert tls.frames == frames


def test_a_frame_larger_than_the_buffer_grows_it_to_hold_the_frame_then_shrinks_back():
    size = 4 * _TLS_BUFFER_KEPT
    data, frames = _stream([100, size, 100])
    tls = _recording(TlsClientConnection)
    first = tls.get_buffer(-1)
    assert len(first) < size
    del first
    feed_tls(tls, data[: 4 + 100 + 4 + 10], [])  # the big frame's size is known now
    assert len(tls.get_buffer(-1)) >= size - 10
    feed_tls(tls, data[4 + 100 + 4 + 10 :], [1 << 20])
    assert tls.frames == frames
    assert len(tls._rbuf) <= _TLS_BUFFER_KEPT


def test_an_oversized_frame_closes_the_connection():
    tls = _recording(TlsClientConnection)
    limit = tls._max_frame
    feed_tls(tls, struct.pack(">i", limit + 1) + b"x" * 10, [])
    assert tls._transport is not None and tls._transport.closed
    assert tls.frames == []


def test_the_tls_connection_is_a_buffered_protocol_to_uvloop():
    # uvloop's TLS transport uses get_buffer/buffer_updated only for a protocol that is not
    # also an asyncio.Protocol; otherwise it silently falls back to data_received
    tls = _recording(TlsClientConnection)
    assert isinstance(tls, asyncio.BufferedProtocol)
    assert not isinstance(tls, asyncio.Protocol)
