"""Request/response headers and the 4-byte size framing of Kafka's wire protocol.

Header versions follow Kafka's `ApiKeys.requestHeaderVersion`/`responseHeaderVersion`:

- request header v0: api key, api version, correlation id (only ControlledShutdown v0);
- request header v1: v0 + client id (int16-length nullable string, never compact);
- request header v2: v1 + a tagged-field section, for flexible request versions;
- response header v0: correlation id; v1 adds a tagged-field section, for flexible versions,
  except that the ApiVersions response header is always v0 (a client must be able to read it
  before it knows which versions the broker supports).
"""

from __future__ import annotations

import struct

from onceflow.common import BytesLike
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError, Reader, Writer
from onceflow.protocol.message import Message
from onceflow.protocol.messages import REQUESTS

__all__ = [
    "RequestHeader",
    "parse_request_header",
    "request_header_version",
    "response_header_version",
    "encode_response_header",
    "encode_response_frame",
    "encode_request_frame",
    "frame",
    "parse_frame_size",
    "FRAME_SIZE_BYTES",
]

FRAME_SIZE_BYTES = 4
_SIZE = struct.Struct(">i")
_RESPONSE_V0 = struct.Struct(">i")
_CONTROLLED_SHUTDOWN = 7


def _is_flexible(api_key: int, api_version: int) -> bool:
    cls = REQUESTS.get(api_key)
    return cls is not None and cls.is_flexible(api_version)


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version (0, 1 or 2) used by `api_key` at `api_version`.

    An unknown api key gets v1: enough to read the correlation id and answer with an error."""
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if _is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version (0 or 1); ApiVersions responses always use v0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if _is_flexible(api_key, api_version) else 0


class RequestHeader:
    """A parsed request header; field names are Kafka's."""

    __slots__ = (
        "request_api_key",
        "request_api_version",
        "correlation_id",
        "client_id",
        "header_version",
    )

    def __init__(
        self,
        *,
        request_api_key: int,
        request_api_version: int,
        correlation_id: int,
        client_id: str | None = None,
        header_version: int | None = None,
    ) -> None:
        self.request_api_key = request_api_key
        self.request_api_version = request_api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        if header_version is None:
            header_version = request_header_version(request_api_key, request_api_version)
        self.header_version = header_version

    def encode(self) -> bytes:
        """The header bytes in `header_version`."""
        w = Writer().int16(self.request_api_key).int16(self.request_api_version)
        w.int32(self.correlation_id)
        if self.header_version >= 1:
            w.nullable_string(self.client_id)
        if self.header_version >= 2:
            w.tagged_fields()
        return w.getvalue()

    def __eq__(self, other: object) -> bool:
        if type(other) is not RequestHeader:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        args = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"RequestHeader({args})"


def parse_request_header(buf: BytesLike, pos: int = 0) -> tuple[RequestHeader, int]:
    """Parse the header of a request frame (without the size prefix).

    Returns `(header, body_offset)`. Unknown tagged fields are skipped. Raises `DecodeError`
    on truncated or malformed input."""
    r = Reader(buf, pos)
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    version = request_header_version(api_key, api_version)
    client_id = r.nullable_string() if version >= 1 else None
    if version >= 2:
        r.tagged_fields()
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id,
        header_version=version,
    )
    return header, r.pos


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v1 (`flexible`: correlation id + empty tagged fields) or v0."""
    header = _RESPONSE_V0.pack(correlation_id)
    return header + b"\x00" if flexible else header


def frame(payload: BytesLike) -> bytes:
    """Prefix `payload` with its 4-byte big-endian size."""
    return _SIZE.pack(len(payload)) + payload


def parse_frame_size(buf: BytesLike, pos: int = 0) -> int:
    """The size announced by a 4-byte frame prefix; raises `DecodeError` when negative/short."""
    if len(buf) - pos < FRAME_SIZE_BYTES:
        raise DecodeError("frame size prefix is truncated")
    size: int
    (size,) = _SIZE.unpack_from(buf, pos)
    if size < 0:
        raise DecodeError(f"negative frame size {size}")
    return size


def encode_response_frame(
    correlation_id: int, api_key: int, api_version: int, response: Message
) -> list[BytesLike]:
    """A whole response frame as bytes-like parts: size, header, body (records not copied).

    Write it with `transport.writelines(parts)` or `b"".join(parts)`."""
    header = encode_response_header(
        correlation_id, response_header_version(api_key, api_version) == 1
    )
    parts = response.encode_parts(api_version)
    size = len(header) + sum(p.nbytes if type(p) is memoryview else len(p) for p in parts)
    return [_SIZE.pack(size), header, *parts]


def encode_request_frame(header: RequestHeader, request: Message) -> bytes:
    """A whole request frame (size prefix, header, body) — for clients and tests."""
    return frame(header.encode() + request.encode(header.request_api_version))
