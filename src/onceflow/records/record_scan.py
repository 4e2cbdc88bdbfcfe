"""Records of a v2 batch read only as far as their keys: for the log cleaner, which needs each
record's offset, key and whether it is a tombstone, and its bytes to copy, but never its value
or headers.

`scan_records` walks the records section (uncompressed): per record it reads the length, the
timestamp and offset deltas and the key, and the value's length (so a null value, a tombstone,
is known), then jumps to the record's end. The value and headers are neither copied nor
checked; `decode_into` (`records.record`) stays the decoder that validates a whole record
(the two share `read_record_head`).
`reframe_record` gives one scanned record's bytes with a new timestamp delta, copying its key,
value and headers as they are.
"""

from __future__ import annotations

from typing import NamedTuple

from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import read_record_head, records_section
from onceflow.records.varint import varint_bytes

__all__ = ["ScannedRecords", "reframe_record", "scan_batch", "scan_records"]


class ScannedRecords(NamedTuple):
    """Scanned records as parallel lists, one entry per record, over `body`.

    `starts[i]:ends[i]` is record i's whole encoding in `body` (its length varint included);
    `fields[i]` is where its key length starts (after attributes and the two deltas).
    """

    body: bytes
    offset_deltas: list[int]
    timestamp_deltas: list[int]
    keys: list[bytes | None]
    tombstones: list[bool]
    starts: list[int]
    fields: list[int]
    ends: list[int]


def scan_records(body: bytes, count: int) -> ScannedRecords:
    """Scan exactly `count` records filling `body` (the uncompressed records section)."""
    if count < 0:
        raise CorruptRecordError(f"invalid record count {count}")
    out = ScannedRecords(body, [], [], [], [], [], [], [])
    offset_deltas, timestamp_deltas, keys = out.offset_deltas, out.timestamp_deltas, out.keys
    tombstones, starts, fields, ends = out.tombstones, out.starts, out.fields, out.ends
    buf_end = len(body)
    pos = 0
    buf = body
    try:
        for index in range(count):
            if pos >= buf_end:
                raise CorruptRecordError(f"batch declares {count} records but holds only {index}")
            starts.append(pos)
            end, timestamp_delta, offset_delta, field, key, pos = read_record_head(
                buf, pos, buf_end
            )
            fields.append(field)
            keys.append(key)
            if pos >= end:
                raise CorruptRecordError(f"record at position {starts[-1]} has no value length")
            tombstones.append(buf[pos] == 1)  # a value length of -1 is the one byte 0x01
            offset_deltas.append(offset_delta)
            timestamp_deltas.append(timestamp_delta)
            ends.append(end)
            pos = end
    except IndexError:
        raise CorruptRecordError(f"record truncated at position {pos}") from None
    if pos != buf_end:
        raise CorruptRecordError(f"{buf_end - pos} bytes remain after the batch's {count} records")
    return out


def scan_batch(batch: bytes | bytearray | memoryview) -> ScannedRecords:
    """Scan every record of a whole v2 batch, decompressing when its codec says so."""
    count, body = records_section(batch)
    return scan_records(body, count)


def reframe_record(scanned: ScannedRecords, index: int, timestamp_delta: int) -> bytes:
    """Record `index` of `scanned` encoded with `timestamp_delta` (its own bytes when equal)."""
    body, start, end = scanned.body, scanned.starts[index], scanned.ends[index]
    if timestamp_delta == scanned.timestamp_deltas[index]:
        return body[start:end]
    tail = body[scanned.fields[index] : end]
    # attributes, then the deltas (`varint_bytes` encodes both as varlongs, which for an int32
    # are the same bytes as its varint)
    prefix = b"\x00" + varint_bytes(timestamp_delta) + varint_bytes(scanned.offset_deltas[index])
    return varint_bytes(len(prefix) + len(tail)) + prefix + tail
