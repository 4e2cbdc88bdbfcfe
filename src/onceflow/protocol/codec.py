"""Kafka's primitive wire types: a `Reader`, a `Writer` and the fast helpers generated code uses.

`Reader` and the generated `Message.decode` raise `DecodeError` on truncated input, bad
lengths, non-nullable nulls or invalid UTF-8. The module-level `read_*` helpers are their fast
path: on truncation they may raise `IndexError`/`struct.error`, which those callers convert, so
call them directly only under the same conversion. Decoded `records` values are
`memoryview` slices of the input (zero-copy); decoded `bytes` values are copies, so keeping one
does not pin a whole request frame.

The module-level `read_*` helpers take `(buf, pos)` and return `(value, new_pos)`; `buf` must be a
`memoryview` (or `bytes`). The `encode_*` helpers return `bytes` including length prefixes.
"""

from __future__ import annotations

import builtins
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from onceflow.common import BytesLike

__all__ = [
    "DecodeError",
    "UnsupportedVersionError",
    "Reader",
    "Writer",
    "ZERO_UUID",
]


class DecodeError(ValueError):
    """Input bytes are not a valid encoding (truncated, bad length, bad UTF-8, ...)."""


class UnsupportedVersionError(ValueError):
    """A message cannot be encoded at the requested version."""


ZERO_UUID = uuid.UUID(int=0)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_BOOL = struct.Struct(">?")

_unpack_i16 = _I16.unpack_from
_unpack_i32 = _I32.unpack_from
pack_i8 = _I8.pack
pack_i16 = _I16.pack
pack_i32 = _I32.pack

_UVARINT_SMALL = tuple(bytes((n,)) for n in range(128))

_NULL_I16 = b"\xff\xff"
_NULL_I32 = b"\xff\xff\xff\xff"
_NULL_UVARINT = b"\x00"


# ---------------------------------------------------------------------------------------------
# varints


def read_uvarint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes, as Kafka's `readUnsignedVarint`)."""
    b = buf[pos]
    if b < 0x80:  # the common one-byte case, without the loop
        return b, pos + 1
    return _read_unsigned(buf, pos, 28, "unsigned varint is longer than 5 bytes")


def _read_uvarlong(buf: BytesLike, pos: int) -> tuple[int, int]:
    return _read_unsigned(buf, pos, 63, "varlong is longer than 10 bytes")


def _read_unsigned(buf: BytesLike, pos: int, max_shift: int, too_long: str) -> tuple[int, int]:
    """Read 7-bit groups, least significant first, until one without the high bit; more
    groups than `max_shift` allows is `DecodeError(too_long)`."""
    value = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > max_shift:
            raise DecodeError(too_long)


def read_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed 32-bit varint."""
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zig-zag encoded signed 64-bit varlong."""
    raw, pos = _read_uvarlong(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative int as an unsigned varint."""
    if value < 128:
        if value < 0:
            raise ValueError(f"unsigned varint cannot be negative: {value}")
        return _UVARINT_SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Encode a signed 32-bit int as a zig-zag varint."""
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"varint out of range: {value}")
    return encode_uvarint((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """Encode a signed 64-bit int as a zig-zag varlong."""
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"varlong out of range: {value}")
    return encode_uvarint((value << 1) ^ (value >> 63))


# ---------------------------------------------------------------------------------------------
# lengths


def _checked_end(buf: BytesLike, pos: int, n: int) -> int:
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"need {n} bytes at offset {pos}, only {len(buf) - pos} left")
    return end


def read_array_length(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read an int32 array length; -1 (null) is returned as -1. Checks it fits the input."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements cannot fit in {len(buf) - pos} bytes")
    if n < -1:
        raise DecodeError(f"negative array length {n}")
    return n, pos


def read_compact_array_length(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a compact (uvarint N+1) array length; null is returned as -1."""
    n, pos = read_uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements cannot fit in {len(buf) - pos} bytes")
    return n, pos


def non_null_array(n: int, field: str) -> None:
    """Raise `DecodeError` if a non-nullable array was serialized as null."""
    if n < 0:
        raise DecodeError(f"non-nullable field {field} was serialized as null")


# ---------------------------------------------------------------------------------------------
# strings


def read_string(buf: BytesLike, pos: int) -> tuple[str, int]:
    """int16-length UTF-8 string, not nullable."""
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    if n < 0:
        raise DecodeError("non-nullable string was serialized as null")
    end = _checked_end(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf: BytesLike, pos: int) -> tuple[str | None, int]:
    """int16-length UTF-8 string; -1 is None."""
    (n,) = _unpack_i16(buf, pos)
    pos += 2
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"negative string length {n}")
    end = _checked_end(buf, pos, n)
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf: BytesLike, pos: int) -> tuple[str, int]:
    """uvarint (N+1)-length UTF-8 string, not nullable."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise DecodeError("non-nullable string was serialized as null")
    end = _checked_end(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf: BytesLike, pos: int) -> tuple[str | None, int]:
    """uvarint (N+1)-length UTF-8 string; 0 is None."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _checked_end(buf, pos, n - 1)
    return str(buf[pos:end], "utf-8"), end


def encode_string(value: str) -> bytes:
    """int16-length string."""
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode_nullable_string(value: str | None) -> bytes:
    """int16-length string, None as -1."""
    if value is None:
        return _NULL_I16
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode_compact_string(value: str) -> bytes:
    """uvarint (N+1)-length string."""
    data = value.encode()
    return encode_uvarint(len(data) + 1) + data


def encode_compact_nullable_string(value: str | None) -> bytes:
    """uvarint (N+1)-length string, None as 0."""
    if value is None:
        return _NULL_UVARINT
    data = value.encode()
    return encode_uvarint(len(data) + 1) + data


# ---------------------------------------------------------------------------------------------
# bytes and records


def read_bytes(buf: BytesLike, pos: int) -> tuple[bytes, int]:
    """int32-length bytes (a copy), not nullable."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        raise DecodeError("non-nullable bytes were serialized as null")
    end = _checked_end(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf: BytesLike, pos: int) -> tuple[bytes | None, int]:
    """int32-length bytes (a copy); -1 is None."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"negative bytes length {n}")
    end = _checked_end(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: BytesLike, pos: int) -> tuple[bytes, int]:
    """uvarint (N+1)-length bytes (a copy), not nullable."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise DecodeError("non-nullable bytes were serialized as null")
    end = _checked_end(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf: BytesLike, pos: int) -> tuple[bytes | None, int]:
    """uvarint (N+1)-length bytes (a copy); 0 is None."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _checked_end(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_records(buf: BytesLike, pos: int) -> tuple[memoryview | None, int]:
    """int32-length record set as a zero-copy memoryview slice; -1 is None."""
    (n,) = _unpack_i32(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"negative records length {n}")
    end = _checked_end(buf, pos, n)
    return memoryview(buf)[pos:end], end


def read_compact_records(buf: BytesLike, pos: int) -> tuple[memoryview | None, int]:
    """uvarint (N+1)-length record set as a zero-copy memoryview slice; 0 is None."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _checked_end(buf, pos, n - 1)
    return memoryview(buf)[pos:end], end


def encode_bytes(value: BytesLike) -> bytes:
    """int32-length bytes."""
    return _I32.pack(len(value)) + value


def encode_nullable_bytes(value: BytesLike | None) -> bytes:
    """int32-length bytes, None as -1."""
    if value is None:
        return _NULL_I32
    return _I32.pack(len(value)) + value


def encode_compact_bytes(value: BytesLike) -> bytes:
    """uvarint (N+1)-length bytes."""
    return encode_uvarint(len(value) + 1) + value


def encode_compact_nullable_bytes(value: BytesLike | None) -> bytes:
    """uvarint (N+1)-length bytes, None as 0."""
    if value is None:
        return _NULL_UVARINT
    return encode_uvarint(len(value) + 1) + value


def write_records(value: BytesLike | None, out: list[BytesLike]) -> None:
    """Append an int32-length record set to `out` without copying it; None as -1."""
    if value is None:
        out.append(_NULL_I32)
    else:
        out.append(_I32.pack(_nbytes(value)))
        out.append(value)


def write_compact_records(value: BytesLike | None, out: list[BytesLike]) -> None:
    """Append a compact record set to `out` without copying it; None as 0."""
    if value is None:
        out.append(_NULL_UVARINT)
    else:
        out.append(encode_uvarint(_nbytes(value) + 1))
        out.append(value)


def _nbytes(value: BytesLike) -> int:
    return value.nbytes if type(value) is memoryview else len(value)


# ---------------------------------------------------------------------------------------------
# uuid


def read_uuid(buf: BytesLike, pos: int) -> tuple[uuid.UUID, int]:
    """16-byte UUID."""
    end = _checked_end(buf, pos, 16)
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def encode_uuid(value: uuid.UUID) -> bytes:
    """16-byte UUID."""
    return value.bytes


# ---------------------------------------------------------------------------------------------
# arrays of primitives

_FIXED_FORMATS = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I"}
_FIXED_FORMATS.update({"int64": "q", "float64": "d", "bool": "?"})


def read_fixed_items(
    buf: BytesLike, pos: int, n: int, code: str, size: int
) -> tuple[list[Any], int]:
    """Read `n` fixed-size items with struct format character `code`."""
    end = _checked_end(buf, pos, n * size)
    return list(struct.unpack_from(f">{n}{code}", buf, pos)), end


def encode_fixed_items(values: Sequence[float], code: str) -> bytes:
    """Pack fixed-size items with struct format character `code` (no length prefix)."""
    return struct.pack(f">{len(values)}{code}", *values)


def skip_tagged_fields(buf: BytesLike, pos: int) -> int:
    """Skip a whole tagged-field section; returns the position after it. Raises DecodeError
    (never IndexError) on a truncated section, so response-header parsing can call it as is."""
    try:
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            pos = _checked_end(buf, pos, size)
    except IndexError as exc:
        raise DecodeError("truncated tagged fields") from exc
    return pos


def tagged_field_end(buf: BytesLike, pos: int, size: int) -> int:
    """End position of a tagged field of `size` bytes at `pos`, checked against the input."""
    return _checked_end(buf, pos, size)


# ---------------------------------------------------------------------------------------------
# Reader / Writer: convenient cursor objects for hand-written codecs (headers, tests)


_T = TypeVar("_T")


def _fixed_getter(name: str, st: struct.Struct, kind: type[_T]) -> Callable[[Reader], _T]:
    """A `Reader` method that reads one fixed-size value with `st` and advances the cursor;
    `kind` is the Python type `st` unpacks to."""

    def read(self: Reader) -> _T:
        end = self.pos + st.size
        if end > len(self.buf):
            raise DecodeError(f"need {st.size} bytes at offset {self.pos}, only {self.remaining}")
        value: _T
        (value,) = st.unpack_from(self.buf, self.pos)
        self.pos = end
        return value

    read.__name__ = read.__qualname__ = name
    return read


def _getter(
    name: str, decode: Callable[[BytesLike, int], tuple[_T, int]]
) -> Callable[[Reader], _T]:
    """A `Reader` method that reads one value with `decode(buf, pos) -> (value, end)`; any
    failure of `decode` on short or malformed input surfaces as `DecodeError`."""

    def read(self: Reader) -> _T:
        try:
            value, self.pos = decode(self.buf, self.pos)
        except DecodeError:
            raise
        except (IndexError, struct.error, ValueError) as exc:
            raise DecodeError(f"{name} at offset {self.pos}: {exc}") from exc
        return value

    read.__name__ = read.__qualname__ = name
    return read


class Reader:
    """A cursor over `bytes`/`memoryview` reading Kafka primitives; raises `DecodeError`."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: BytesLike, pos: int = 0) -> None:
        self.buf = buf if type(buf) is memoryview else memoryview(buf)
        self.pos = pos

    @property
    def remaining(self) -> int:
        """Bytes left after the cursor."""
        return len(self.buf) - self.pos

    int8 = _fixed_getter("int8", _I8, int)
    int16 = _fixed_getter("int16", _I16, int)
    uint16 = _fixed_getter("uint16", _U16, int)
    int32 = _fixed_getter("int32", _I32, int)
    uint32 = _fixed_getter("uint32", _U32, int)
    int64 = _fixed_getter("int64", _I64, int)
    float64 = _fixed_getter("float64", _F64, float)
    boolean = _fixed_getter("boolean", _BOOL, bool)
    uvarint = _getter("uvarint", read_uvarint)
    varint = _getter("varint", read_varint)
    varlong = _getter("varlong", read_varlong)
    uuid = _getter("uuid", read_uuid)
    string = _getter("string", read_string)
    nullable_string = _getter("nullable_string", read_nullable_string)
    compact_string = _getter("compact_string", read_compact_string)
    compact_nullable_string = _getter("compact_nullable_string", read_compact_nullable_string)
    bytes = _getter("bytes", read_bytes)
    nullable_bytes = _getter("nullable_bytes", read_nullable_bytes)
    compact_bytes = _getter("compact_bytes", read_compact_bytes)
    compact_nullable_bytes = _getter("compact_nullable_bytes", read_compact_nullable_bytes)
    records = _getter("records", read_records)
    compact_records = _getter("compact_records", read_compact_records)

    # Array lengths: -1 means null.
    array_length = _getter("array_length", read_array_length)
    compact_array_length = _getter("compact_array_length", read_compact_array_length)

    def raw(self, n: int) -> memoryview:
        """The next `n` bytes, zero-copy."""
        if n < 0:
            raise DecodeError(f"negative length {n}")
        end = _checked_end(self.buf, self.pos, n)
        view = self.buf[self.pos : end]
        self.pos = end
        return view

    def tagged_fields(self) -> dict[int, memoryview]:
        """Read a tagged-field section into `{tag: raw value bytes}`."""
        fields: dict[int, memoryview] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields


def _appender(name: str, encode: Callable[[_T], bytes]) -> Callable[[Writer, _T], Writer]:
    """A `Writer` method that appends `encode(value)` and returns the writer (for chaining)."""

    def append(self: Writer, value: _T) -> Writer:
        self.buf += encode(value)
        return self

    append.__name__ = append.__qualname__ = name
    return append


def _uuid_bytes(value: uuid.UUID) -> bytes:
    return value.bytes


class Writer:
    """Appends Kafka primitives to a `bytearray`; `getvalue()` returns `bytes`. Each primitive
    method appends one value and returns the writer, so calls chain."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self.buf)

    int8 = _appender("int8", _I8.pack)
    int16 = _appender("int16", _I16.pack)
    uint16 = _appender("uint16", _U16.pack)
    int32 = _appender("int32", _I32.pack)
    uint32 = _appender("uint32", _U32.pack)
    int64 = _appender("int64", _I64.pack)
    float64 = _appender("float64", _F64.pack)
    boolean = _appender("boolean", _BOOL.pack)
    uvarint = _appender("uvarint", encode_uvarint)
    varint = _appender("varint", encode_varint)
    varlong = _appender("varlong", encode_varlong)
    uuid = _appender("uuid", _uuid_bytes)
    string = _appender("string", encode_string)
    nullable_string = _appender("nullable_string", encode_nullable_string)
    compact_string = _appender("compact_string", encode_compact_string)
    compact_nullable_string = _appender("compact_nullable_string", encode_compact_nullable_string)
    bytes = _appender("bytes", encode_bytes)
    nullable_bytes = _appender("nullable_bytes", encode_nullable_bytes)
    compact_bytes = _appender("compact_bytes", encode_compact_bytes)
    compact_nullable_bytes = _appender("compact_nullable_bytes", encode_compact_nullable_bytes)

    def array_length(self, n: int | None) -> Writer:
        """int32 array length; None means null."""
        self.buf += _NULL_I32 if n is None else _I32.pack(n)
        return self

    def compact_array_length(self, n: int | None) -> Writer:
        """Compact array length; None means null."""
        self.buf += _NULL_UVARINT if n is None else encode_uvarint(n + 1)
        return self

    def raw(self, data: BytesLike) -> Writer:
        self.buf += data
        return self

    def tagged_fields(self, fields: Mapping[int, builtins.bytes] | None = None) -> Writer:
        """Write a tagged-field section from `{tag: raw value bytes}`, in tag order."""
        fields = fields or {}
        self.uvarint(len(fields))
        for tag in sorted(fields):
            data = fields[tag]
            self.uvarint(tag).uvarint(len(data)).raw(data)
        return self
