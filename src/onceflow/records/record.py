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
from typing import NamedTuple, NoReturn

from onceflow.common import BytesLike
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
    "RecordColumns",
    "decode_batch_columns",
    "decode_columns",
    "decode_into",
    "decode_record",
    "decode_records",
    "decode_records_body",
    "encode_record",
    "read_record_head",
    "records_section",
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


def _read_bytes(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"record {what} has invalid length {length}")
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"record {what} of {length} bytes overruns the record")
    return bytes(buf[pos : pos + length]), pos + length


def _read_headers(buf: bytes, pos: int, end: int) -> tuple[list[Header], int]:
    count, pos = decode_varint(buf, pos)
    if count < 0:
        raise CorruptRecordError(f"record has invalid header count {count}")
    headers: list[Header] = []
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
    return headers, pos


def _bad_length(size: int, what: str) -> NoReturn:
    """Raise for a key or value length the record cannot hold (negative but not -1, or past
    the record's end)."""
    if size < -1:
        raise CorruptRecordError(f"record {what} has invalid length {size}")
    raise CorruptRecordError(f"record {what} of {size} bytes overruns the record")


class RecordColumns(NamedTuple):
    """Decoded records as parallel lists, one entry per record (see `decode_into`)."""

    offset_deltas: list[int]
    timestamp_deltas: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[Header]]

    @classmethod
    def empty(cls) -> RecordColumns:
        return cls([], [], [], [], [])


def read_record_head(
    buf: bytes, pos: int, buf_end: int
) -> tuple[int, int, int, int, bytes | None, int]:
    """Read the record at `pos` of `buf` (which ends at `buf_end`) up to its key: `(record end,
    timestamp_delta, offset_delta, position of the key length, key, position after the key)`.

    Lengths and deltas that fit one byte (and lengths and offset deltas that fit two) are
    decoded inline; anything longer goes through `decode_varint`. Shared by the decoder and
    the key-only scan (`records.record_scan`).
    """
    byte = buf[pos]
    if byte < 0x80:
        length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    elif buf[pos + 1] < 0x80:  # two bytes: records of 64 B to 8 KiB
        length = byte & 0x7F | buf[pos + 1] << 7
        length, pos = (length >> 1) ^ -(length & 1), pos + 2
    else:
        length, pos = decode_varint(buf, pos)
    end = pos + length
    if length < 1 or end > buf_end:
        raise CorruptRecordError(f"record length {length} at position {pos} is invalid")
    pos += 1  # attributes: unused in v2
    byte = buf[pos]
    if byte < 0x80:
        timestamp_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    else:
        timestamp_delta, pos = decode_varlong(buf, pos)
    byte = buf[pos]
    if byte < 0x80:
        offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    elif buf[pos + 1] < 0x80:  # two bytes: deltas of 64 to 8191
        offset_delta = byte & 0x7F | buf[pos + 1] << 7
        offset_delta, pos = (offset_delta >> 1) ^ -(offset_delta & 1), pos + 2
    else:
        offset_delta, pos = decode_varint(buf, pos)
    key_pos = pos
    byte = buf[pos]
    if byte < 0x80:
        size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    else:
        size, pos = decode_varint(buf, pos)
    key: bytes | None
    if size >= 0 and pos + size <= end:
        key = buf[pos : pos + size]
        pos += size
    elif size == -1:
        key = None
    else:
        _bad_length(size, "key")
    return end, timestamp_delta, offset_delta, key_pos, key, pos


def decode_into(buf: bytes, pos: int, count: int, out: RecordColumns) -> int:
    """Decode `count` records of `buf` from `pos`, appending their fields to `out`; returns
    the position after the last one.

    This is the one record decoder: the row form (`decode_record`, `decode_records_body`) is
    built on it. Lengths and deltas that fit one byte are decoded inline, so a record costs a
    few byte reads and two slices; anything longer goes through `decode_varint`.
    """
    offset_deltas, timestamp_deltas = out.offset_deltas, out.timestamp_deltas
    keys, values, all_headers = out.keys, out.values, out.headers
    buf_end = len(buf)
    try:
        for index in range(count):
            if pos >= buf_end:
                raise CorruptRecordError(f"batch declares {count} records but holds only {index}")
            end, timestamp_delta, offset_delta, _, key, pos = read_record_head(buf, pos, buf_end)
            byte = buf[pos]
            if byte < 0x80:
                size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
            elif buf[pos + 1] < 0x80:  # two bytes: values of 64 B to 8 KiB
                size = byte & 0x7F | buf[pos + 1] << 7
                size, pos = (size >> 1) ^ -(size & 1), pos + 2
            else:
                size, pos = decode_varint(buf, pos)
            value: bytes | None
            if size >= 0 and pos + size <= end:
                value = buf[pos : pos + size]
                pos += size
            elif size == -1:
                value = None
            else:
                _bad_length(size, "value")
            if buf[pos] == 0:  # no headers
                headers: list[Header] = []
                pos += 1
            else:
                headers, pos = _read_headers(buf, pos, end)
            if pos != end:
                raise CorruptRecordError(
                    f"record fields end at position {pos}, not at its declared end {end}"
                )
            offset_deltas.append(offset_delta)
            timestamp_deltas.append(timestamp_delta)
            keys.append(key)
            values.append(value)
            all_headers.append(headers)
    except IndexError:
        raise CorruptRecordError(f"record truncated at position {pos}") from None
    return pos


def _as_bytes(buf: BytesLike) -> bytes:
    return buf if isinstance(buf, bytes) else bytes(buf)


def decode_record(buf: BytesLike, pos: int) -> tuple[Record, int]:
    """Decode the record starting at `pos` of `buf`; returns `(record, next_pos)`."""
    columns = RecordColumns.empty()
    pos = decode_into(_as_bytes(buf), pos, 1, columns)
    return Record._make(column[0] for column in columns), pos


def decode_columns(body: BytesLike, count: int) -> RecordColumns:
    """Decode exactly `count` records filling `body` (the uncompressed records section)."""
    if count < 0:
        raise CorruptRecordError(f"invalid record count {count}")
    data = _as_bytes(body)
    columns = RecordColumns.empty()
    pos = decode_into(data, 0, count, columns)
    if pos != len(data):
        raise CorruptRecordError(
            f"{len(data) - pos} bytes remain after the batch's {count} records"
        )
    return columns


def decode_records_body(body: BytesLike, count: int) -> list[Record]:
    """Decode exactly `count` records filling `body` (the uncompressed records section)."""
    return list(map(Record, *decode_columns(body, count)))


def records_section(batch: BytesLike) -> tuple[int, bytes]:
    """`(records count, the records section uncompressed)` of a whole v2 batch."""
    header = parse_header(batch)
    view = memoryview(batch)
    if header.total_size != len(view):
        raise CorruptRecordError(
            f"batch length {header.total_size} does not match the {len(view)} bytes given"
        )
    return header.records_count, _as_bytes(decompress(header.compression, view[RECORDS_OFFSET:]))


def decode_batch_columns(batch: BytesLike) -> RecordColumns:
    """Decode every record of a whole v2 batch as columns, decompressing when its codec says
    so."""
    count, body = records_section(batch)
    return decode_columns(body, count)


def decode_records(batch: BytesLike) -> list[Record]:
    """Decode every record of a whole v2 batch, decompressing when its codec says so."""
    return list(map(Record, *decode_batch_columns(batch)))
