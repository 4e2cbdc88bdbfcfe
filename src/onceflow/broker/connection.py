"""One client connection: size-prefixed frames in, responses out in request order.

Each complete frame is parsed (request header, then body) as soon as it arrives and its
handler starts as a task at once, so requests are processed in arrival order; handlers make
their state changes before their first `await`. Responses are written strictly in request
order (pipelining): a finished response waits for every earlier one. A Produce with acks=0
has no response. A frame larger than `socket.request.max.bytes`, a malformed header or body,
or an API/version this broker does not serve closes the connection with one log line naming
the peer and the reason (ApiVersions with an unknown version is answered instead, KIP-511).

On a SASL listener the connection carries a `SaslAuthenticator`: until the login completes
only the requests it allows pass (ApiVersions, SaslHandshake, SaslAuthenticate; anything else
closes the connection with one log line, as Kafka) and frames are capped at
`sasl.server.max.receive.size` instead of `socket.request.max.bytes`. `ctx.principal` is the
TLS client certificate's (`principal_of`, on SSL listeners) or the SASL login's.

Backpressure: when the transport's write buffer passes its high-water mark, or too many
requests are in flight, the connection stops reading until it drains.

On a TLS listener the connection is a `TlsClientConnection`: the TLS transport decrypts into
the connection's own receive buffer (asyncio's `BufferedProtocol`) instead of handing over new
bytes per read, and a large response is written to it in 256 KiB pieces, so that the start of
a fetch is sent while the rest is still being encrypted (bench/README.md, "Security").
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onceflow.broker import dispatch
from onceflow.broker.context import ANONYMOUS, RequestContext
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.headers import encode_response_header, parse_request_header

if TYPE_CHECKING:
    from onceflow.broker.sasl_authenticator import SaslAuthenticator
    from onceflow.broker.state import BrokerState

log = logging.getLogger("onceflow.broker.connection")

_SIZE = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhi")  # api key, api version, correlation id
MAX_IN_FLIGHT = 64  # requests started but not yet answered before reading pauses
_LARGE_PART = 16384  # response parts above this are written without joining
_TLS_WRITE_PIECE = 256 * 1024  # large responses go to a TLS transport in pieces of this size
_TLS_READ_MIN = 256 * 1024  # free space offered to a TLS transport to decrypt into
_TLS_BUFFER_KEPT = 16 * 1024 * 1024  # a larger receive buffer is dropped once it is empty


_FETCH_KEY = int(ApiKey.FETCH)


class _Pending:
    """A request whose response has not been written yet."""

    __slots__ = ("correlation_id", "api_key", "version", "flexible_header", "task", "ready")

    def __init__(self, correlation_id: int, api_key: int, version: int, flexible_header: bool):
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.flexible_header = flexible_header
        self.task: asyncio.Future[Any] | None = None
        self.ready: Any = None  # a response object built without a task


class ClientConnection(asyncio.BaseProtocol):
    """asyncio protocol for one client; created by `Broker` for each accepted socket. It
    receives with `data_received`, as an `asyncio.Protocol` does, but derives from
    `BaseProtocol` only: uvloop takes any protocol that is an `asyncio.Protocol` as one, so
    `TlsClientConnection` could not be a `BufferedProtocol` otherwise."""

    def __init__(
        self,
        broker: BrokerState,
        on_close: Callable[[ClientConnection], object] | None = None,
        *,
        listener_name: str | None = None,
        authenticator: SaslAuthenticator | None = None,
        principal_of: Callable[[asyncio.BaseTransport], str] | None = None,
    ) -> None:
        self.broker = broker
        self._on_close = on_close
        self.listener_name = listener_name
        self.authenticator = authenticator
        self.principal = ANONYMOUS
        # transport -> principal (an SSL listener's client certificate); may raise to refuse
        self._principal_of = principal_of
        self._max_frame = broker.config.socket_request_max_bytes
        self._max_unauthenticated = broker.config.get("sasl.server.max.receive.size")
        self._buffer = bytearray()
        self._pending: deque[_Pending] = deque()
        self._transport: asyncio.Transport | None = None
        self._tls = False
        self._write_paused = False
        self._read_paused = False
        self._closing = False
        self._draining = False
        self.peer = "?"
        self.ctx: RequestContext | None = None
        self.idle = asyncio.Event()
        self.idle.set()
        self._debug = log.isEnabledFor(logging.DEBUG)
        self._metrics = broker.metrics

    # asyncio.Protocol callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._tls = transport.get_extra_info("sslcontext") is not None
        peername = transport.get_extra_info("peername")
        if isinstance(peername, tuple):
            self.peer = f"{peername[0]}:{peername[1]}"
        if self._principal_of is not None:
            try:
                self.principal = self._principal_of(transport)
            except Exception as exc:
                self.close_with_error(f"no principal for the client certificate: {exc}")
                return
        self.ctx = RequestContext(
            self.broker, self.peer, self, self.principal, listener_name=self.listener_name
        )
        log.debug("connection from %s", self.peer)

    def connection_lost(self, exc: Exception | None) -> None:
        """Requests already read keep running to completion, as in Kafka: a handler between
        a coordinator's prepare and complete must not be interrupted (a cancelled transition
        would stay pending). Only long-polling fetches, which change nothing, are cancelled.
        Their responses are dropped."""
        self._closing = True
        for pending in self._pending:
            if pending.task is not None and pending.api_key == _FETCH_KEY:
                pending.task.cancel()
        self._pending.clear()
        self.idle.set()
        log.debug("connection from %s closed", self.peer)
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self._closing or self._draining:
            return
        buffer = self._buffer
        if buffer:
            buffer += data
            source: Any = buffer
        else:
            source = data
        pos = self._take_frames(source, 0, len(source))
        if pos is None:
            return
        if source is buffer:
            del buffer[:pos]
        elif pos < len(data):
            buffer += memoryview(data)[pos:]
        self._update_reading()

    def _take_frames(self, source: Any, pos: int, end: int) -> int | None:
        """Handle every complete frame in `source[pos:end]`; returns where the first incomplete
        one starts, or None when the connection closed or began draining meanwhile."""
        authenticator = self.authenticator
        max_frame = self._max_frame
        frame_limit = "socket.request.max.bytes"
        if authenticator is not None and not authenticator.authenticated:
            max_frame = self._max_unauthenticated
            frame_limit = "sasl.server.max.receive.size"
        while end - pos >= 4:
            size = _SIZE.unpack_from(source, pos)[0]
            if size < 0 or size > max_frame:
                self.close_with_error(
                    f"request frame of {size} bytes exceeds {frame_limit}={max_frame}"
                    if size >= 0
                    else f"negative request size {size}"
                )
                return None
            if end - pos - 4 < size:
                break
            frame = bytearray(memoryview(source)[pos + 4 : pos + 4 + size])
            pos += 4 + size
            self._handle_frame(frame)
            if self._closing or self._draining:
                return None
            if authenticator is not None and authenticator.authenticated:
                max_frame, frame_limit = self._max_frame, "socket.request.max.bytes"
        return pos

    # requests

    def _handle_frame(self, frame: bytearray) -> None:
        try:
            header, body_offset = parse_request_header(frame)
        except DecodeError as exc:
            if len(frame) >= 8:
                api_key, version, correlation_id = _HEADER_START.unpack_from(frame)
                if (
                    api_key == dispatch.API_VERSIONS_KEY
                    and dispatch.lookup(api_key, version) is None
                ):
                    # an unknown ApiVersions version: its header layout is unknown too, but
                    # the correlation id is all the v0 error answer needs (KIP-511)
                    self._answer_unsupported_api_versions(correlation_id)
                    return
            self.close_with_error(f"malformed request header: {exc}")
            return
        api_key = header.request_api_key
        version = header.request_api_version
        if self.authenticator is not None:
            refusal = self.authenticator.refusal(api_key)
            if refusal is not None:
                self.close_with_error(refusal)
                return
        api = dispatch.lookup(api_key, version)
        if api is None:
            if api_key == dispatch.API_VERSIONS_KEY:
                self._answer_unsupported_api_versions(header.correlation_id)
                return
            self.close_with_error(
                f"unsupported API {dispatch.api_name(api_key)} (key {api_key}) version {version}"
            )
            return
        try:
            request = api.request_cls.decode(memoryview(frame)[body_offset:], version)
        except DecodeError as exc:
            self.close_with_error(f"malformed {api.name} v{version} request: {exc}")
            return
        if self._debug:
            log.debug("%s v%d from %s (%s)", api.name, version, self.peer, header.client_id)
        self._metrics.count_request(api_key)
        pending = _Pending(header.correlation_id, api_key, version, api.flexible(version))
        # ApiVersions responses always use response header v0 (KIP-511)
        if api_key == dispatch.API_VERSIONS_KEY:
            pending.flexible_header = False
        if self.ctx is None:  # set by connection_made, before any data arrives
            raise RuntimeError("request before connection_made")
        task = asyncio.ensure_future(api.handler(self.ctx, header, request))
        pending.task = task
        self._pending.append(pending)
        self.idle.clear()
        task.add_done_callback(self._on_task_done)

    def _answer_unsupported_api_versions(self, correlation_id: int) -> None:
        pending = _Pending(correlation_id, dispatch.API_VERSIONS_KEY, 0, False)
        pending.ready = dispatch.unsupported_api_versions_response()
        self._pending.append(pending)
        self._flush_ready()

    def _on_task_done(self, _task: asyncio.Future[Any]) -> None:
        self._flush_ready()

    def _flush_ready(self) -> None:
        pending_queue = self._pending
        while pending_queue and not self._closing:
            head = pending_queue[0]
            if head.task is not None:
                if not head.task.done():
                    break
                if head.task.cancelled():
                    pending_queue.popleft()
                    continue
                exc = head.task.exception()
                if exc is not None:
                    log.error(
                        "%s v%d from %s failed; closing the connection",
                        dispatch.api_name(head.api_key),
                        head.version,
                        self.peer,
                        exc_info=exc,
                    )
                    self.close()
                    return
                response = head.task.result()
            else:
                response = head.ready
            pending_queue.popleft()
            if response is not None:
                self._write_response(head, response)
        if not pending_queue:
            self.idle.set()
            if self._draining:
                self.close()
                return
        self._update_reading()

    def _write_response(self, pending: _Pending, response: Any) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        parts = response.encode_parts(pending.version)
        header = encode_response_header(pending.correlation_id, pending.flexible_header)
        size = len(header)
        large = False
        for part in parts:
            n = len(part) if type(part) is not memoryview else part.nbytes
            size += n
            if n > _LARGE_PART:
                large = True
        if large and self._tls:
            # a TLS transport encrypts all it is given before it sends a byte: pieces let the
            # client receive (and decrypt) the start of a large fetch while the rest is
            # encrypted, and keep the encrypted copy small
            transport.write(_SIZE.pack(size) + header)
            for part in parts:
                view = memoryview(part)
                for start in range(0, view.nbytes, _TLS_WRITE_PIECE):
                    transport.write(view[start : start + _TLS_WRITE_PIECE])
        elif large:
            # record sets go out as their own buffers instead of being copied into one
            transport.writelines([_SIZE.pack(size) + header, *parts])
        else:
            transport.write(b"".join([_SIZE.pack(size), header, *parts]))

    # flow control and shutdown

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        should_pause = self._write_paused or len(self._pending) >= MAX_IN_FLIGHT or self._draining
        if should_pause and not self._read_paused:
            transport.pause_reading()
            self._read_paused = True
        elif not should_pause and self._read_paused:
            transport.resume_reading()
            self._read_paused = False

    def close_with_error(self, reason: str) -> None:
        """Close the connection, logging one line with the peer and reason."""
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.close()

    def close(self) -> None:
        """Close now; responses not yet written are dropped."""
        self._closing = True
        if self._transport is not None:
            self._transport.close()

    def begin_drain(self) -> None:
        """Stop reading new requests; close once every in-flight response is written."""
        self._draining = True
        self._update_reading()
        if not self._pending:
            self.close()

    def abort(self) -> None:
        """Close without waiting (after a drain timeout)."""
        self._closing = True
        if self._transport is not None:
            self._transport.abort()


class TlsClientConnection(ClientConnection, asyncio.BufferedProtocol):
    """A connection on a TLS listener: the transport decrypts straight into this connection's
    receive buffer (`get_buffer`/`buffer_updated`), instead of handing over each read as new
    bytes that are then joined and appended to the buffer: one copy of every request byte
    fewer, a fifth of the broker's CPU for receiving over TLS. (On plain TCP, asyncio's
    bytes-per-read path measured faster, so plaintext listeners keep `ClientConnection`.)

    Frames are handled exactly as `ClientConnection.data_received` does. The buffer grows to
    hold the largest frame in progress and is compacted, never resized while the transport
    may hold a view of it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rbuf = bytearray(2 * _TLS_READ_MIN)
        self._start = self._end = 0  # unhandled bytes are _rbuf[_start:_end]

    def get_buffer(self, sizehint: int) -> memoryview:
        rbuf, start, end = self._rbuf, self._start, self._end
        needed = _TLS_READ_MIN
        if end - start >= 4:  # room for the whole frame in progress, if it may be that large
            size = _SIZE.unpack_from(rbuf, start)[0]
            if 0 <= size <= self._max_frame:
                needed = max(needed, 4 + size - (end - start))
        if len(rbuf) - end < needed:
            live = end - start
            if start and len(rbuf) - live >= needed:
                rbuf[:live] = rbuf[start:end]  # same length: no resize
            else:
                grown = bytearray(max(2 * len(rbuf), live + needed))
                grown[:live] = memoryview(rbuf)[start:end]
                self._rbuf = rbuf = grown
            self._start, self._end = 0, live
        return memoryview(rbuf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        if self._closing or self._draining:
            return
        pos = self._take_frames(self._rbuf, self._start, self._end)
        if pos is None:
            return
        if pos == self._end:
            self._start = self._end = 0
            if len(self._rbuf) > _TLS_BUFFER_KEPT:  # after a large frame: give the memory back
                self._rbuf = bytearray(2 * _TLS_READ_MIN)
        else:
            self._start = pos
        self._update_reading()
