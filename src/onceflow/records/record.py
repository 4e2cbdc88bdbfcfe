"""Records inside a v2 batch: encode, decode, and decode a whole batch (decompressing).

A record on the wire::

    length varint            (bytes that follow)
    attributes int8          (unused, 0)
    timestampDelta varlong   (from the batch's baseTimestamp)
    offsetDelta varint       (from the batch's baseOffset)
    keyLength varint, key    (-1: null key)
    valueLength varint, value (-1: null value)
    headerCount varint, then per header: keyLength varint, key (UTF-8), valueLength varint, value

Anything malformed raises CorruptRecordError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from onceflow.records.batch import RECORDS_OFFSET, parse_header
from onceflow.records.compression import decompress
from onceflow.records.errors import CorruptRecordError
from onceflow.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "Header",
    "Record",
    "decode_record",
    "decode_records",
    "decode_records_body",
    "encode_record",
]

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    """One record, relative to its batch (absolute offset = base_offset + offset_delta)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()  # decoded records carry a list


def _encode_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zig-zag -1
    else:
        encode_varint(out, len(data))
        out += data


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> int:
    """Append one record to `out`; returns the number of bytes written."""
    body = bytearray(b"\x00")  # attributes
    encode_varlong(body, timestamp_delta)
    encode_varint(body, offset_delta)
    _encode_bytes(body, key)
    _encode_bytes(body, value)
    encode_varint(body, len(headers))
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8") if isinstance(header_key, str) else header_key
        if encoded_key is None:
            raise ValueError("record header keys cannot be null")
        _encode_bytes(body, encoded_key)
        _encode_bytes(body, header_value)
    start = len(out)
    encode_varint(out, len(body))
    out += body
    return len(out) - start


def _read_bytes(buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"record {what} has invalid length {length}")
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"record {what} of {length} bytes overruns the record")
    return bytes(buf[pos : pos + length]), pos + length


def decode_record(buf, pos: int) -> tuple[Record, int]:
    """Decode the record starting at `pos` of `buf`; returns `(record, next_pos)`."""
    length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 1 or end > len(buf):
        raise CorruptRecordError(f"record length {length} at position {pos} is invalid")
    pos += 1  # attributes: unused in v2
    timestamp_delta, pos = decode_varlong(buf, pos)
    offset_delta, pos = decode_varint(buf, pos)
    key, pos = _read_bytes(buf, pos, end, "key")
    value, pos = _read_bytes(buf, pos, end, "value")
    count, pos = decode_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"record has invalid header count {count}")
    headers = []
    for _ in range(count):
        raw_key, pos = _read_bytes(buf, pos, end, "header key")
        if raw_key is None:
            raise CorruptRecordError("record header key is null")
        try:
            header_key = raw_key.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError("record header key is not UTF-8") from None
        header_value, pos = _read_bytes(buf, pos, end, "header value")
        headers.append((header_key, header_value))
    if pos != end:
        raise CorruptRecordError(
            f"record declared {length} bytes but its fields take {length - (end - pos)}"
        )
    return Record(offset_delta, timestamp_delta, key, value, headers), pos


def decode_records_body(body, count: int) -> list[Record]:
    """Decode exactly `count` records filling `body` (the uncompressed records section)."""
    if count < 0:
        raise CorruptRecordError(f"invalid record count {count}")
    records = []
    pos, end = 0, len(body)
    for _ in range(count):
        if pos >= end:
            raise CorruptRecordError(
                f"batch declares {count} records but holds only {len(records)}"
            )
        record, pos = decode_record(body, pos)
        records.append(record)
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes remain after the batch's {count} records")
    return records


def decode_records(batch) -> list[Record]:
    """Decode every record of a whole v2 batch, decompressing when its codec says so."""
    header = parse_header(batch)
    view = memoryview(batch)
    if header.total_size != len(view):
        raise CorruptRecordError(
            f"batch length {header.total_size} does not match the {len(view)} bytes given"
        )
    body = decompress(header.compression, view[RECORDS_OFFSET:])
    return decode_records_body(body, header.records_count)
