"""A producer-side v2 batch writer tuned for the per-record hot path.

`RecordBatchWriter` appends records to a `bytearray` with table-driven varints (no per-field
function calls for the usual small lengths and deltas) and builds the batch once, when it is
drained: header laid out as `records.builder.BatchBuilder` lays it out (base offset 0,
partition leader epoch -1, producer id/epoch/base sequence as stamped), records compressed
with `records.compression`, CRC32C last. Records with headers, and values outside the varint
table, take `records.record.encode_record`, the reference encoder; the tests check that both
paths decode to the same records with `records.record.decode_records`.
"""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.records.batch import (
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    patch_crc,
)
from onceflow.records.compression import compress
from onceflow.records.record import encode_record
from onceflow.records.varint import SMALL_VARINTS, varint_bytes

__all__ = ["RecordBatchWriter"]

_TABLE_SIZE = len(SMALL_VARINTS)
_VARINT = SMALL_VARINTS  # lengths, offset and timestamp deltas
_NULL = b"\x01"  # zig-zag -1: a null key or value
_ZERO = b"\x00"


class RecordBatchWriter:
    """Records of one batch, encoded as they arrive; `build` makes the v2 batch."""

    __slots__ = ("compression", "records", "count", "base_timestamp", "max_timestamp")

    def __init__(self, compression: int = 0):
        self.compression = compression
        self.records = bytearray()
        self.count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1

    @property
    def size(self) -> int:
        """Uncompressed bytes so far, header included."""
        return HEADER_SIZE + len(self.records)

    def append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> int:
        """Add a record; returns its offset delta."""
        count = self.count
        if count == 0:
            self.base_timestamp = timestamp
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        delta = timestamp - self.base_timestamp
        out = self.records
        if headers or not 0 <= delta < _TABLE_SIZE or count >= _TABLE_SIZE:
            encode_record(out, count, delta, key, value, headers)
        else:
            if key is None:
                key_part = _NULL
            else:
                key_part = varint_bytes(len(key)) + key
            if value is None:
                value_len, value_size = _NULL, 0
            else:
                value_size = len(value)
                value_len = varint_bytes(value_size)
            ts_part = _VARINT[delta]
            offset_part = _VARINT[count]
            body = 2 + len(ts_part) + len(offset_part) + len(key_part) + len(value_len) + value_size
            out += varint_bytes(body)
            out += _ZERO  # attributes
            out += ts_part
            out += offset_part
            out += key_part
            out += value_len
            if value is not None:
                out += value
            out += _ZERO  # no headers
        self.count = count + 1
        return count

    def build(
        self, producer_id: int, producer_epoch: int, base_sequence: int, attributes: int
    ) -> bytearray:
        """The finished batch (`attributes` must carry the compression bits)."""
        if not self.count:
            raise ValueError("a record batch needs at least one record")
        body = self.records if not self.compression else compress(self.compression, self.records)
        batch = bytearray(HEADER_SIZE)
        batch += body
        HEADER_STRUCT.pack_into(
            batch,
            0,
            0,  # base offset: the broker assigns it
            len(batch) - LOG_OVERHEAD,
            NO_PARTITION_LEADER_EPOCH,
            MAGIC,
            0,  # crc, set below
            attributes,
            self.count - 1,
            self.base_timestamp,
            self.max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            self.count,
        )
        patch_crc(batch)
        return batch
