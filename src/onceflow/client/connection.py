"""A small blocking connection to one Kafka broker.

`BrokerConnection` opens a socket, negotiates versions with ApiVersions (for each API the highest
version both this client's generated messages and the broker support) and sends requests built
from `onceflow.protocol.messages`, one at a time, matching correlation ids. Headers follow
Kafka: request header v1 (v2 for flexible versions), response header v0 (v1 for flexible
versions, except ApiVersions, whose response header is always v0).

Errors (defined in `client.errors`, imported here for the callers of this module):
transport failures raise `KafkaConnectionError` (an `OSError`) and `KafkaTimeoutError`; a
version neither side shares raises `UnsupportedVersionError`; `raise_for_error` turns a
Kafka error code into its typed error.
"""

from __future__ import annotations

import itertools
import socket
import struct
from typing import Any

from onceflow.client.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    raise_for_error,
)
from onceflow.protocol import messages
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError, skip_tagged_fields
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import RequestHeader, response_header_version

CLIENT_SOFTWARE_NAME = "onceflow"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")


def is_flexible(message_cls: Any, version: int) -> bool:
    """True when `version` of this message uses Kafka's flexible (tagged-field) encoding."""
    flexible_min = message_cls.FLEXIBLE_MIN
    return flexible_min is not None and version >= flexible_min


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


def _parse_bootstrap(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"bad broker address {address!r}: expected host:port")
    return host.strip("[]"), int(port)


class BrokerConnection:
    """A blocking connection to one broker: `send(request)` returns the decoded response."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "onceflow",
        request_timeout_ms: int = 30_000,
    ):
        self.host, self.port = host, port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._sock: socket.socket | None = None
        self._correlation_ids = itertools.count(1)

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
        try:
            self._negotiate_versions()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Close the socket (idempotent)."""
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

    def api_version(self, api_key: int) -> int:
        """The highest version of `api_key` both this client and the broker support."""
        return negotiate_version(self.broker_versions, api_key)

    def _negotiate_versions(self) -> None:
        request_cls = messages.REQUESTS[ApiKey.API_VERSIONS]
        response_cls = messages.RESPONSES[ApiKey.API_VERSIONS]
        version = request_cls.VALID_VERSIONS[1]
        for _attempt in range(2):
            request = request_cls(
                client_software_name=CLIENT_SOFTWARE_NAME,
                client_software_version=CLIENT_SOFTWARE_VERSION,
            )
            flexible = is_flexible(request_cls, version)
            raw = self.send_raw(ApiKey.API_VERSIONS, version, request.encode(version), flexible)
            # the response header is always v0; a broker that does not know `version` answers
            # UNSUPPORTED_VERSION with a v0 body listing its own ApiVersions range (KIP-511)
            error_code = _INT16.unpack_from(raw)[0] if len(raw) >= 2 else None
            body_version = 0 if error_code == ErrorCode.UNSUPPORTED_VERSION else version
            try:
                response = response_cls.decode(memoryview(raw), body_version)
            except DecodeError as exc:
                raise BrokerResponseError(f"cannot decode ApiVersions response: {exc}") from exc
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                theirs = {k.api_key: k.max_version for k in response.api_keys or ()}
                version = min(version - 1, theirs.get(int(ApiKey.API_VERSIONS), 0))
                continue
            raise_for_error(response.error_code, "ApiVersions")
            self.broker_versions = {
                k.api_key: (k.min_version, k.max_version) for k in response.api_keys
            }
            return
        raise UnsupportedVersionError("ApiVersions negotiation failed")

    # ------------------------------------------------------------------ requests

    def send(self, request: Any, version: int | None = None) -> Any:
        """Send a request (at `version`, default: negotiated) and return the decoded response."""
        api_key = int(request.API_KEY)
        if version is None:
            version = self.api_version(api_key)
        flexible = is_flexible(type(request), version)
        raw = self.send_raw(api_key, version, request.encode(version), flexible)
        response_cls = messages.RESPONSES[api_key]
        body_pos = 0
        if response_header_version(api_key, version) >= 1:
            try:
                body_pos = skip_tagged_fields(raw, 0)
            except DecodeError as exc:
                raise BrokerResponseError(f"malformed response header: {exc}") from exc
        try:
            return response_cls.decode(memoryview(raw)[body_pos:], version)
        except DecodeError as exc:
            raise BrokerResponseError(
                f"cannot decode {_api_name(api_key)} v{version} response: {exc}"
            ) from exc

    def send_raw(self, api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
        """Send a request body with a fresh header; return the response after its correlation id
        (the response header's tagged fields, if any, are left in place)."""
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        header = encode_request_header(api_key, version, correlation_id, self.client_id, flexible)
        self.send_frame(header + body)
        response = self.receive_frame()
        if len(response) < 4:
            raise BrokerResponseError("response shorter than its header")
        (got,) = _INT32.unpack_from(response)
        if got != correlation_id:
            raise BrokerResponseError(f"correlation id {got} does not match {correlation_id}")
        return response[4:]

    def send_frame(self, payload: bytes) -> None:
        """Send one size-prefixed frame as is."""
        sock = self._require_socket()
        try:
            sock.sendall(_INT32.pack(len(payload)) + payload)
        except TimeoutError as exc:
            self.close()
            raise KafkaTimeoutError("send timed out") from exc
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"send to {self.host}:{self.port} failed: {exc}") from exc

    def receive_frame(self) -> bytes:
        """Receive one size-prefixed frame; returns its payload."""
        (size,) = _INT32.unpack(self._recv_exactly(4))
        if size < 0:
            self.close()
            raise BrokerResponseError(f"negative response size {size}")
        return self._recv_exactly(size)

    def _recv_exactly(self, n: int) -> bytes:
        sock = self._require_socket()
        buf = bytearray()
        try:
            while len(buf) < n:
                chunk = sock.recv(min(n - len(buf), 1 << 20))
                if not chunk:
                    self.close()
                    raise KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
                buf += chunk
        except TimeoutError as exc:
            self.close()
            raise KafkaTimeoutError(
                f"no response from {self.host}:{self.port} within {self.request_timeout_ms} ms"
            ) from exc
        except KafkaConnectionError:
            raise
        except OSError as exc:
            self.close()
            raise KafkaConnectionError(f"receive from {self.host}:{self.port}: {exc}") from exc
        return bytes(buf)

    def _require_socket(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(f"not connected to {self.host}:{self.port}")
        return self._sock


def negotiate_version(
    broker_versions: dict[int, tuple[int, int]], api_key: int, max_version: int | None = None
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


def connect_bootstrap(
    bootstrap_servers: str, *, client_id: str | None = "onceflow", request_timeout_ms: int = 30_000
) -> BrokerConnection:
    """Connect to the first reachable broker of a `bootstrap.servers` list."""
    failures = []
    for address in filter(None, (a.strip() for a in bootstrap_servers.split(","))):
        conn = BrokerConnection.from_address(
            address, client_id=client_id, request_timeout_ms=request_timeout_ms
        )
        try:
            return conn.connect()
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            failures.append(str(exc))
    if not failures:
        raise ValueError("bootstrap.servers is empty")
    raise KafkaConnectionError("; ".join(failures))
