"""The client side of Kafka's protocol conversation, without I/O: bytes in, events out.

h11's `Connection` is the model. `WireConnection` knows nothing of sockets, threads or asyncio;
a transport (the blocking `connection.BrokerConnection`, the asyncio
`network.AsyncBrokerConnection`) writes what `data_to_send()` returns, feeds what it reads to
`receive_data()` and takes completed responses from `next_event()`. The core owns:

- correlation ids (from 1, wrapping to 0 after 2**31 - 1) and request headers: v1, or v2 for
  flexible versions, with this connection's client id;
- size-prefixed framing of requests and responses, and matching each response to the oldest
  request in flight (a broker answers in order on one connection);
- response headers: v0, or v1 for flexible versions, except ApiVersions, whose response header
  is always v0;
- the handshake: ApiVersions at our highest version first; a broker that does not know it
  answers UNSUPPORTED_VERSION with its own range in a v0 body (KIP-511), and we retry once at
  a version both support. The broker's ranges then give each API's version (`api_version`).

- SASL (when built with a `sasl.SaslClient`): after ApiVersions, SaslHandshake v1 with the
  mechanism, then SaslAuthenticate requests carrying the mechanism's tokens until it is
  complete (AUTHENTICATING). A failed exchange closes the connection and raises
  `SaslAuthenticationFailedError` with the broker's message (`UnsupportedSaslMechanismError`
  with the broker's enabled mechanisms for a mechanism it does not enable). KIP-368
  re-authentication is not done: `session_lifetime_ms` is kept, and a broker that sets it
  closes the connection when the session expires; the transports then reconnect (and
  authenticate again) as after any lost connection.

Everything that decides which state may follow which is the table below; the transports only
ask `handshaking`, so TLS and SASL need nothing of them beyond the socket.

Errors: a response that breaks the conversation (a bad size, a correlation id out of order, a
failed handshake) closes the connection and raises from `next_event()` — `BrokerResponseError`,
or the typed error of ApiVersions' error code. A response whose body does not decode fails only
its own request (`Response.error`). Calls the state does not allow raise
`InvalidWireTransitionError`/`IllegalStateError`.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any, Final

from onceflow.client.errors import (
    BrokerResponseError,
    IllegalStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from onceflow.client.net.sasl import SaslClient
from onceflow.common import BytesLike
from onceflow.protocol import messages
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError, skip_tagged_fields
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import RequestHeader, response_header_version
from onceflow.protocol.message import Message
from onceflow.protocol.messages.api_versions import ApiVersionsRequest
from onceflow.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from onceflow.protocol.messages.sasl_handshake import SaslHandshakeRequest
from onceflow.security.sasl import SaslAuthenticationError

__all__ = [
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "VALID_PREVIOUS",
    "InvalidWireTransitionError",
    "PendingRequest",
    "Response",
    "WireConnection",
    "WireState",
    "encode_request_header",
    "negotiate_version",
]

CLIENT_SOFTWARE_NAME = "onceflow"
CLIENT_SOFTWARE_VERSION = "0.1.0"
API_VERSIONS_ATTEMPTS = 2  # our highest version, then one KIP-511 retry
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")
_SIZE_BYTES = 4
_CORRELATION_BYTES = 4


class WireState(Enum):
    """Where the conversation is."""

    NEGOTIATING = "NEGOTIATING"  # ApiVersions in flight; nothing else may be sent
    AUTHENTICATING = "AUTHENTICATING"  # SaslHandshake / SaslAuthenticate in flight
    READY = "READY"  # requests may be sent
    CLOSED = "CLOSED"  # closed by the transport or by a response that broke the conversation


_W = WireState

# target state -> the states it may be entered from (NEGOTIATING is where a connection starts)
VALID_PREVIOUS: Final[Mapping[WireState, frozenset[WireState]]] = MappingProxyType(
    {
        _W.NEGOTIATING: frozenset(),
        _W.AUTHENTICATING: frozenset({_W.NEGOTIATING}),
        _W.READY: frozenset({_W.NEGOTIATING, _W.AUTHENTICATING}),
        _W.CLOSED: frozenset({_W.NEGOTIATING, _W.AUTHENTICATING, _W.READY}),
    }
)
HANDSHAKE_STATES: Final = frozenset({_W.NEGOTIATING, _W.AUTHENTICATING})
SASL_HANDSHAKE_VERSION = 1  # v0 would send the tokens as raw frames (pre-KIP-152)


class InvalidWireTransitionError(IllegalStateError):
    """A transition the table does not allow (a client bug, never a broker answer)."""

    def __init__(self, source: WireState, target: WireState):
        self.source, self.target = source, target
        super().__init__(f"Invalid transition attempted from state {source.name} to {target.name}")


@dataclass(slots=True, repr=False, eq=False)
class PendingRequest:
    """A request sent and not yet answered. `context` and `deadline` belong to the transport
    (e.g. its future and when to give up); the core only stores them."""

    correlation_id: int
    api_key: int
    api_version: int
    context: Any  # the caller's, handed back with the response (a future, for the network)
    deadline: float
    handshake: bool

    def __repr__(self) -> str:
        return (
            f"PendingRequest({_api_name(self.api_key)} v{self.api_version}, "
            f"correlation_id={self.correlation_id})"
        )


class Response:
    """The event for one answered request: `message` is the decoded response, or None with
    `error` set when its body or header does not decode."""

    __slots__ = ("request", "message", "error")

    def __init__(self, request: PendingRequest, message: Any, error: BrokerResponseError | None):
        self.request, self.message, self.error = request, message, error

    def __repr__(self) -> str:
        outcome = f"error={self.error!r}" if self.error is not None else "ok"
        return f"Response({self.request!r}, {outcome})"


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, flexible: bool
) -> bytes:
    """Request header v1 (v2, with an empty tagged-field section, when `flexible`)."""
    return RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
        header_version=2 if flexible else 1,
    ).encode()


class WireConnection:
    """One connection's protocol state. It starts NEGOTIATING with an ApiVersions request
    waiting in `data_to_send()`; with `sasl` it authenticates before it is READY."""

    def __init__(self, client_id: str | None = "onceflow", sasl: SaslClient | None = None) -> None:
        self.client_id = client_id
        self.sasl = sasl
        self.session_lifetime_ms = 0  # from the last SaslAuthenticate response (v1+)
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._state = WireState.NEGOTIATING
        self._correlation_ids = itertools.count(1)
        self._pending: deque[PendingRequest] = deque()
        self._outbox: list[BytesLike] = []
        self._chunks: list[bytes] = []  # received, not yet a whole frame
        self._buffered = 0
        self._need = _SIZE_BYTES  # bytes the next step waits for: a size prefix, or a frame
        self._in_frame = False
        self._api_versions_sent = 0
        self._send_api_versions(ApiVersionsRequest.VALID_VERSIONS[1])

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> WireState:
        return self._state

    @property
    def handshaking(self) -> bool:
        """True until the handshake has completed (or the connection closed)."""
        return self._state in HANDSHAKE_STATES

    @property
    def ready(self) -> bool:
        return self._state is WireState.READY

    def _transition(self, target: WireState) -> None:
        if self._state not in VALID_PREVIOUS[target]:
            raise InvalidWireTransitionError(self._state, target)
        self._state = target

    def close(self) -> list[PendingRequest]:
        """Close (idempotent); returns the requests still waiting for an answer, which never
        will get one, for the transport to fail."""
        if self._state is not WireState.CLOSED:
            self._transition(WireState.CLOSED)
        self._chunks, self._buffered = [], 0
        pending, self._pending = list(self._pending), deque()
        return pending

    def _broken(self, error: Exception) -> Exception:
        """Close because a response broke the conversation; returns `error` to raise."""
        self._transition(WireState.CLOSED)
        return error

    @property
    def in_flight(self) -> int:
        """Requests sent and waiting for their response (handshake requests included)."""
        return len(self._pending)

    @property
    def oldest_pending(self) -> PendingRequest | None:
        """The request the next response answers, if any."""
        return self._pending[0] if self._pending else None

    # ------------------------------------------------------------------ versions

    def api_version(self, api_key: int, max_version: int | None = None) -> int:
        """Highest version of `api_key` both sides support (capped at `max_version`)."""
        return negotiate_version(self.broker_versions, api_key, max_version)

    def supports(self, api_key: int) -> bool:
        return int(api_key) in self.broker_versions

    # ------------------------------------------------------------------ bytes out

    def send_request(
        self,
        request: Message,
        version: int | None = None,
        *,
        expect_response: bool = True,
        context: Any = None,
        deadline: float = math.inf,
    ) -> int:
        """Queue a request (at `version`, default: the negotiated one) for `data_to_send()`;
        returns its correlation id. With `expect_response` false (Produce with acks=0) no
        response is awaited. Raises UnsupportedVersionError for a version neither side has."""
        if self._state is not WireState.READY:
            raise IllegalStateError(
                f"cannot send {_api_name(request.API_KEY)} on a {self._state.name} connection"
            )
        return self._send(request, version, expect_response, context, deadline, handshake=False)

    def _send(
        self,
        request: Message,
        version: int | None,
        expect_response: bool,
        context: Any,
        deadline: float,
        handshake: bool,
    ) -> int:
        api_key = int(request.API_KEY)
        if version is None:
            version = self.api_version(api_key)
        parts = request.encode_parts(version)
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        header = encode_request_header(
            api_key, version, correlation_id, self.client_id, request.is_flexible(version)
        )
        size = len(header) + sum(p.nbytes if type(p) is memoryview else len(p) for p in parts)
        self._outbox += (_INT32.pack(size), header, *parts)
        if expect_response:
            self._pending.append(
                PendingRequest(correlation_id, api_key, version, context, deadline, handshake)
            )
        return correlation_id

    def data_to_send(self) -> list[BytesLike]:
        """The bytes-like parts queued since the last call, in order (possibly none)."""
        out, self._outbox = self._outbox, []
        return out

    # ------------------------------------------------------------------ bytes in

    def receive_data(self, data: bytes) -> None:
        """Buffer bytes read from the broker (after close they are dropped)."""
        if data and self._state is not WireState.CLOSED:
            self._chunks.append(data)
            self._buffered += len(data)

    @property
    def bytes_needed(self) -> int:
        """How many more bytes the next frame (or its size prefix) needs; a read hint."""
        return max(self._need - self._buffered, 0)

    def next_event(self) -> Response | None:
        """The next completed response, or None when more data is needed. Handshake responses
        are handled here and produce no event. Raises (and closes) when a response breaks the
        conversation."""
        while True:
            frame = self._next_frame()
            if frame is None:
                return None
            event = self._response(frame)
            if not event.request.handshake:
                return event
            _HANDSHAKE_HANDLERS[event.request.api_key](self, event)

    def _next_frame(self) -> memoryview | None:
        while self._state is not WireState.CLOSED and self._buffered >= self._need:
            chunks = self._chunks
            buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            if not self._in_frame:
                (size,) = _INT32.unpack_from(buf)
                if size < _CORRELATION_BYTES:
                    raise self._broken(BrokerResponseError(f"invalid response size {size}"))
                self._chunks = [buf]
                self._need = _SIZE_BYTES + size
                self._in_frame = True
                continue
            end = self._need
            rest = buf[end:]
            self._chunks = [rest] if rest else []
            self._buffered = len(rest)
            self._need = _SIZE_BYTES
            self._in_frame = False
            return memoryview(buf)[_SIZE_BYTES:end]
        return None

    def _response(self, frame: memoryview) -> Response:
        (correlation_id,) = _INT32.unpack_from(frame)
        request = self._pending[0] if self._pending else None
        if request is None or request.correlation_id != correlation_id:
            expected = "none in flight" if request is None else f"expected {request.correlation_id}"
            raise self._broken(
                BrokerResponseError(f"unexpected correlation id {correlation_id} ({expected})")
            )
        self._pending.popleft()
        api_key, version = request.api_key, request.api_version
        try:
            pos = _CORRELATION_BYTES
            if response_header_version(api_key, version) >= 1:
                pos = skip_tagged_fields(frame, pos)
            body_version = version
            if api_key == ApiKey.API_VERSIONS and len(frame) >= pos + 2:
                # a broker that does not know our version answers with a v0 body (KIP-511)
                if _INT16.unpack_from(frame, pos)[0] == ErrorCode.UNSUPPORTED_VERSION:
                    body_version = 0
            message = messages.RESPONSES[api_key].decode(frame[pos:], body_version)
        except (DecodeError, struct.error) as exc:
            error = BrokerResponseError(f"cannot decode {_api_name(api_key)} v{version}: {exc}")
            return Response(request, None, error)
        return Response(request, message, None)

    # ------------------------------------------------------------------ handshake

    def _send_api_versions(self, version: int) -> None:
        request = ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        )
        self._api_versions_sent += 1
        self._send(request, version, True, None, math.inf, handshake=True)

    def _on_api_versions(self, event: Response) -> None:
        if event.error is not None:
            raise self._broken(event.error)
        response, version = event.message, event.request.api_version
        if response.error_code == ErrorCode.UNSUPPORTED_VERSION and version > 0:
            if self._api_versions_sent >= API_VERSIONS_ATTEMPTS:
                raise self._broken(UnsupportedVersionError("ApiVersions negotiation failed"))
            theirs = {k.api_key: k.max_version for k in response.api_keys or ()}
            self._send_api_versions(min(version - 1, theirs.get(int(ApiKey.API_VERSIONS), 0)))
            return
        if response.error_code != ErrorCode.NONE:
            raise self._broken(error_for_code(response.error_code, "ApiVersions"))
        self.broker_versions = {
            k.api_key: (k.min_version, k.max_version) for k in response.api_keys
        }
        self._handshake_done()

    def _handshake_done(self) -> None:
        if self.sasl is None:
            self._transition(WireState.READY)
            return
        self._transition(WireState.AUTHENTICATING)
        request = SaslHandshakeRequest(mechanism=self.sasl.mechanism)
        try:
            version = self.api_version(ApiKey.SASL_HANDSHAKE)
        except UnsupportedVersionError as exc:
            raise self._broken(exc) from None
        if version < SASL_HANDSHAKE_VERSION:
            raise self._broken(UnsupportedVersionError("broker supports only SaslHandshake v0"))
        self._send(request, SASL_HANDSHAKE_VERSION, True, None, math.inf, handshake=True)

    def _on_sasl_handshake(self, event: Response) -> None:
        if event.error is not None:
            raise self._broken(event.error)
        response = event.message
        if response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            enabled = ", ".join(response.mechanisms or ()) or "none"
            raise self._broken(
                UnsupportedSaslMechanismError(
                    f"the broker does not enable {self._sasl.mechanism} (enabled: {enabled})"
                )
            )
        if response.error_code != ErrorCode.NONE:
            raise self._broken(error_for_code(response.error_code, "SaslHandshake"))
        self._sasl_step(self._sasl.first_token)

    def _on_sasl_authenticate(self, event: Response) -> None:
        if event.error is not None:
            raise self._broken(event.error)
        response = event.message
        if response.error_code != ErrorCode.NONE:
            raise self._broken(
                error_for_code(response.error_code, response.error_message or "SaslAuthenticate")
            )
        self.session_lifetime_ms = response.session_lifetime_ms or 0
        sasl = self._sasl
        token = self._sasl_step(lambda: sasl.next_token(response.auth_bytes or b""))
        if token is None:
            self._transition(WireState.READY)

    @property
    def _sasl(self) -> SaslClient:
        """The mechanism, in the SASL steps of the handshake (which only run with one)."""
        if self.sasl is None:
            raise IllegalStateError("a SASL step on a connection without SASL")
        return self.sasl

    def _sasl_step(self, make_token: Callable[[], bytes | None]) -> bytes | None:
        """Send the SaslAuthenticate the mechanism's next token makes (None: it is done)."""
        try:
            token = make_token()
        except SaslAuthenticationError as exc:  # a bad server token (e.g. a wrong signature)
            raise self._broken(SaslAuthenticationFailedError(exc.client_message)) from None
        if token is not None:
            request = SaslAuthenticateRequest(auth_bytes=token)
            version = self.api_version(ApiKey.SASL_AUTHENTICATE)
            self._send(request, version, True, None, math.inf, handshake=True)
        return token


# api key of a handshake request -> how its response moves the handshake on
_HANDSHAKE_HANDLERS: Final = MappingProxyType(
    {
        int(ApiKey.API_VERSIONS): WireConnection._on_api_versions,
        int(ApiKey.SASL_HANDSHAKE): WireConnection._on_sasl_handshake,
        int(ApiKey.SASL_AUTHENTICATE): WireConnection._on_sasl_authenticate,
    }
)


def negotiate_version(
    broker_versions: Mapping[int, tuple[int, int]], api_key: int, max_version: int | None = None
) -> int:
    """The highest version of `api_key` that this client (capped at `max_version`) and a broker
    advertising `broker_versions` both support; UnsupportedVersionError when there is none."""
    ours_min, ours_max = messages.REQUESTS[api_key].VALID_VERSIONS
    if max_version is not None:
        ours_max = min(ours_max, max_version)
    theirs = broker_versions.get(int(api_key))
    if theirs is None:
        raise UnsupportedVersionError(f"broker does not support {_api_name(api_key)}")
    low, high = max(ours_min, theirs[0]), min(ours_max, theirs[1])
    if low > high:
        raise UnsupportedVersionError(
            f"{_api_name(api_key)}: client versions {ours_min}-{ours_max}, "
            f"broker versions {theirs[0]}-{theirs[1]}"
        )
    return high


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"
