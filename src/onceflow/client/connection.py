"""A small blocking connection to one Kafka broker: a socket around `wire.WireConnection`.

`BrokerConnection` opens a socket and lets the protocol core (`client.wire`, shared with the
asyncio connection of the producer and consumer) negotiate versions with ApiVersions, frame
requests and match responses by correlation id. It sends one request at a time: `send`
returns the decoded response. With a `security` (`net.security.ClientSecurity`, from the
confluent-kafka properties) the socket is wrapped in TLS, verified against the host connected
to, and the protocol core authenticates with SASL before the first request.

Errors (defined in `client.errors`, imported here for the callers of this module):
transport failures raise `KafkaConnectionError` (an `OSError`) and `KafkaTimeoutError`; a failed
SASL login raises `SaslAuthenticationFailedError` and a failed TLS handshake
`SslAuthenticationError` (both `AuthenticationError`s: `connect_bootstrap` does not try the
next broker with the same settings); a
version neither side shares raises `UnsupportedVersionError`; a response that does not fit its
request raises `BrokerResponseError`; `raise_for_error` turns a Kafka error code into its
typed error.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any, TypeVar

from onceflow.client.errors import (  # noqa: F401  (re-exported for this module's callers)
    BrokerResponseError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    raise_for_error,
)
from onceflow.client.net.address import split_host_port
from onceflow.client.net.security import PLAINTEXT, ClientSecurity, ssl_authentication_error
from onceflow.client.net.wire import (  # noqa: F401  (re-exported: tests build raw requests)
    Response,
    WireConnection,
    encode_request_header,
    negotiate_version,
)
from onceflow.protocol.message import Message, Request

_R = TypeVar("_R", bound=Message)

_MAX_READ = 1 << 20


def _parse_bootstrap(address: str) -> tuple[str, int]:
    parsed = split_host_port(address)
    if parsed is None:
        raise ValueError(f"bad broker address {address!r}: expected host:port")
    return parsed


class BrokerConnection:
    """A blocking connection to one broker: `send(request)` returns the decoded response."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "onceflow",
        request_timeout_ms: int = 30_000,
        security: ClientSecurity = PLAINTEXT,
    ):
        self.host, self.port = host, port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self._sock: socket.socket | None = None
        self._wire: WireConnection | None = None

    @classmethod
    def from_address(cls, address: str, **kwargs: Any) -> BrokerConnection:
        """A connection to `host:port`, not yet connected."""
        host, port = _parse_bootstrap(address)
        return cls(host, port, **kwargs)

    # ------------------------------------------------------------------ lifecycle

    def connect(self) -> BrokerConnection:
        """Open the socket and negotiate API versions; returns self."""
        timeout = self.request_timeout_ms / 1000
        try:
            self._sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except TimeoutError as exc:
            raise KafkaTimeoutError(f"connecting to {self.host}:{self.port} timed out") from exc
        except OSError as exc:
            raise KafkaConnectionError(
                f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._wire = wire = WireConnection(self.client_id, self.security.sasl())
        try:
            if self.security.ssl_context is not None:
                self._start_tls(self.security.ssl_context)
            self._flush()
            while wire.handshaking:
                self._poll()  # handshake responses make no event
                if wire.handshaking:
                    self._receive()
        except BaseException:
            self.close()
            raise
        return self

    def _start_tls(self, context: ssl.SSLContext) -> None:
        try:
            self._sock = context.wrap_socket(self._require_socket(), server_hostname=self.host)
        except TimeoutError as exc:
            raise KafkaTimeoutError(
                f"TLS handshake with {self.host}:{self.port} timed out"
            ) from exc
        except OSError as exc:  # ssl.SSLError included
            tls_error = ssl_authentication_error(exc, self.host, self.port)
            if tls_error is not None:
                raise tls_error from exc
            raise KafkaConnectionError(
                f"TLS handshake with {self.host}:{self.port} failed: {exc}"
            ) from exc

    def close(self) -> None:
        """Close the socket (idempotent)."""
        if self._wire is not None:
            self._wire.close()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> BrokerConnection:
        return self if self._sock is not None else self.connect()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._sock is not None

    @property
    def local_address(self) -> str | None:
        """`host:port` of this end of the connection (how the broker names the peer)."""
        if self._sock is None:
            return None
        host, port = self._sock.getsockname()[:2]
        return f"{host}:{port}"

    # ------------------------------------------------------------------ versions

    @property
    def broker_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's version range per api key, from ApiVersions (empty before connect)."""
        return self._wire.broker_versions if self._wire is not None else {}

    def api_version(self, api_key: int) -> int:
        """The highest version of `api_key` both this client and the broker support."""
        return negotiate_version(self.broker_versions, api_key)

    # ------------------------------------------------------------------ requests

    def send(self, request: Request[_R], version: int | None = None) -> _R:
        """Send a request (at `version`, default: negotiated) and return the decoded response."""
        self._require_socket()
        self._require_wire().send_request(request, version)
        self._flush()
        while (event := self._poll()) is None:
            self._receive()
        if event.error is not None:
            raise event.error
        response: _R = event.message  # decoded by the request's api key: its response class
        return response

    def _poll(self) -> Response | None:
        """The protocol core's next event (None: it needs more data), after sending whatever
        it queued (a handshake retry)."""
        try:
            event = self._require_wire().next_event()
        except BaseException:
            self.close()
            raise
        self._flush()
        return event

    def _flush(self) -> None:
        parts = self._require_wire().data_to_send()
        if not parts:
            return
        sock = self._require_socket()
        try:
            sock.sendall(b"".join(parts))
        except TimeoutError as exc:
            self.close()
            raise KafkaTimeoutError("send timed out") from exc
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"send to {self.host}:{self.port} failed: {exc}") from exc

    def _receive(self) -> None:
        sock, wire = self._require_socket(), self._require_wire()
        try:
            chunk = sock.recv(min(max(wire.bytes_needed, 1), _MAX_READ))
        except TimeoutError as exc:
            self.close()
            raise KafkaTimeoutError(
                f"no response from {self.host}:{self.port} within {self.request_timeout_ms} ms"
            ) from exc
        except OSError as exc:
            # a TLS alert before the Kafka handshake is through: e.g. TLS 1.3 reports a
            # refused client certificate on the first read
            handshaking = wire.handshaking
            self.close()
            tls_error = ssl_authentication_error(exc, self.host, self.port) if handshaking else None
            if tls_error is not None:
                raise tls_error from exc
            raise KafkaConnectionError(f"receive from {self.host}:{self.port}: {exc}") from exc
        if not chunk:
            self.close()
            raise KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        wire.receive_data(chunk)

    def _require_socket(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(f"not connected to {self.host}:{self.port}")
        return self._sock

    def _require_wire(self) -> WireConnection:
        if self._wire is None:
            raise KafkaConnectionError(f"never connected to {self.host}:{self.port}")
        return self._wire


def connect_bootstrap(
    bootstrap_servers: str,
    *,
    client_id: str | None = "onceflow",
    request_timeout_ms: int = 30_000,
    security: ClientSecurity = PLAINTEXT,
) -> BrokerConnection:
    """Connect to the first reachable broker of a `bootstrap.servers` list (a failed SASL login
    is not a reason to try the next: it raises at once)."""
    failures = []
    for address in filter(None, (a.strip() for a in bootstrap_servers.split(","))):
        conn = BrokerConnection.from_address(
            address,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            security=security,
        )
        try:
            return conn.connect()
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            failures.append(str(exc))
    if not failures:
        raise ValueError("bootstrap.servers is empty")
    raise KafkaConnectionError("; ".join(failures))
