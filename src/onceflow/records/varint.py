"""Zig-zag varints (int32) and varlongs (int64) as used inside v2 records.

Kafka writes signed values zig-zag encoded, seven bits per byte, low group first, the high bit
marking continuation. A varint takes at most 5 bytes and a varlong at most 10; longer encodings
and truncated ones raise CorruptRecordError. One-byte values (the common case for lengths and
deltas) take a fast path in both directions.
"""

from __future__ import annotations

from typing import Final

from onceflow.common import BytesLike
from onceflow.records.errors import CorruptRecordError

__all__ = [
    "decode_varint",
    "decode_varlong",
    "encode_varint",
    "encode_varlong",
    "SMALL_VARINTS",
    "varint_bytes",
    "size_of_varint",
    "size_of_varlong",
]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _write_unsigned(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_varint(out: bytearray, value: int) -> None:
    """Append `value` (an int32) to `out` as a zig-zag varint."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    zigzag = (value << 1) ^ (value >> 31)
    if zigzag < 0x80:
        out.append(zigzag)
    else:
        _write_unsigned(out, zigzag)


def encode_varlong(out: bytearray, value: int) -> None:
    """Append `value` (an int64) to `out` as a zig-zag varlong."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    zigzag = (value << 1) ^ (value >> 63)
    if zigzag < 0x80:
        out.append(zigzag)
    else:
        _write_unsigned(out, zigzag)


def _varlong_bytes(value: int) -> bytes:
    out = bytearray()
    encode_varlong(out, value)
    return bytes(out)


# the zig-zag bytes of 0 .. 16383, for writers that look small values up instead of encoding
SMALL_VARINTS: Final[tuple[bytes, ...]] = tuple(_varlong_bytes(n) for n in range(1 << 14))


def varint_bytes(value: int) -> bytes:
    """`value` (an int64) as zig-zag varlong bytes (a table lookup for 0..16383)."""
    if 0 <= value < 16384:
        return SMALL_VARINTS[value]
    return _varlong_bytes(value)


def _decode(buf: BytesLike, pos: int, max_bytes: int, kind: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = pos + max_bytes
    try:
        while pos < end:
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1), pos
            shift += 7
    except IndexError:
        raise CorruptRecordError(f"{kind} truncated at position {pos}") from None
    raise CorruptRecordError(f"{kind} longer than {max_bytes} bytes at position {pos - max_bytes}")


def decode_varint(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint (int32) at `pos`; returns `(value, next_pos)`."""
    try:
        byte = buf[pos]
    except IndexError:
        raise CorruptRecordError(f"varint truncated at position {pos}") from None
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value, pos = _decode(buf, pos, 5, "varint")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise CorruptRecordError(f"varint out of int32 range at position {pos}")
    return value, pos


def decode_varlong(buf: BytesLike, pos: int) -> tuple[int, int]:
    """Read a zig-zag varlong (int64) at `pos`; returns `(value, next_pos)`."""
    try:
        byte = buf[pos]
    except IndexError:
        raise CorruptRecordError(f"varlong truncated at position {pos}") from None
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value, pos = _decode(buf, pos, 10, "varlong")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise CorruptRecordError(f"varlong out of int64 range at position {pos}")
    return value, pos


def size_of_varint(value: int) -> int:
    """Bytes `encode_varint(value)` writes."""
    zigzag = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return max(1, (zigzag.bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    """Bytes `encode_varlong(value)` writes."""
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (zigzag.bit_length() + 6) // 7)
