"""The v2 record batch header (magic 2): parse, split, CRC32C, patch in place.

The broker keeps batches verbatim; it reads only this 61-byte header and patches a few fields
in place. Layout (big-endian), with the byte offset of each field::

     0 baseOffset int64        27 baseTimestamp int64
     8 batchLength int32       35 maxTimestamp int64
    12 partitionLeaderEpoch    43 producerId int64
    16 magic int8              51 producerEpoch int16
    17 crc uint32              53 baseSequence int32
    21 attributes int16        57 recordsCount int32
    23 lastOffsetDelta int32   61 records...

`batchLength` counts the bytes after itself, so a batch occupies ``batchLength + 12`` bytes. The
CRC (CRC32C) covers everything from `attributes` to the end of the batch: base offset, batch
length and partition leader epoch lie outside it, so assigning offsets needs no CRC update.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from enum import IntEnum
from typing import NamedTuple, TypeAlias

from crc32c import crc32c

from onceflow.common import NO_PRODUCER_ID, BytesLike
from onceflow.records.errors import CorruptRecordError

__all__ = [
    "ATTRIBUTES_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "CRC_OFFSET",
    "HEADER_SIZE",
    "HEADER_STRUCT",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_OFFSET",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORDS_OFFSET",
    "BatchHeader",
    "TimestampType",
    "compute_crc",
    "increment_sequence",
    "iter_batches",
    "parse_header",
    "patch_base_offset",
    "patch_crc",
    "patch_max_timestamp",
    "patch_partition_leader_epoch",
    "split_complete_batches",
    "verify_crc",
]

# a batch patched in place
WritableBytes: TypeAlias = bytearray | memoryview

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
LEGACY_MIN_LENGTH = 14  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_LENGTH_AND_MAGIC = struct.Struct(">i4xb")  # batchLength, (partitionLeaderEpoch), magic

_INT32_MAX = 2**31 - 1


class TimestampType(IntEnum):
    """Attribute bit 3 of a v2 batch (Kafka's `TimestampType`)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch, fields in wire order."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        """The codec id (attributes & 7); compare with `compression.CompressionType`."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        """CREATE_TIME or LOG_APPEND_TIME (attribute bit 3)."""
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        """Attribute bit 4: the batch belongs to a transaction."""
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        """Attribute bit 5: the batch holds a control record (COMMIT/ABORT marker)."""
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Attribute bit 6: base_timestamp is the delete horizon set by compaction (KIP-534)."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def has_producer_id(self) -> bool:
        """True when the batch carries a producer id (idempotent or transactional)."""
        return self.producer_id != NO_PRODUCER_ID

    @property
    def last_offset(self) -> int:
        """Offset of the last record: base_offset + last_offset_delta."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping past 2**31-1 to 0 as Kafka does."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def total_size(self) -> int:
        """Bytes the batch occupies on the wire and on disk: batch_length + 12."""
        return self.batch_length + LOG_OVERHEAD


_new_header = tuple.__new__
_unpack_header = HEADER_STRUCT.unpack_from


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping from 2**31-1 to 0 (Kafka's `incrementSequence`)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


def parse_header(buf: BytesLike, pos: int = 0) -> BatchHeader:
    """Parse the v2 header at `pos` of `buf` (bytes-like). Raises CorruptRecordError if short."""
    try:
        return _new_header(BatchHeader, _unpack_header(buf, pos))
    except struct.error:
        raise CorruptRecordError(
            f"record batch header truncated: {len(buf) - pos} bytes at position {pos}"
        ) from None


def _frame(view: memoryview, pos: int, end: int, max_batch_size: int | None) -> int:
    """Return the total size of the batch at `pos`, -1 if it is cut off by `end`.

    Raises CorruptRecordError for lengths and magics that no amount of extra data would fix.
    """
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        return -1
    length: int = _INT32.unpack_from(view, pos + LENGTH_OFFSET)[0]
    if length < LEGACY_MIN_LENGTH:
        raise CorruptRecordError(f"record batch at position {pos} has invalid length {length}")
    if remaining <= MAGIC_OFFSET:
        return -1
    magic = view[pos + MAGIC_OFFSET]
    if magic != MAGIC:
        if magic in (0, 1):
            raise CorruptRecordError(
                f"message format v{magic} at position {pos} is not supported (only v2)",
                "UNSUPPORTED_FOR_MESSAGE_FORMAT",
            )
        raise CorruptRecordError(f"invalid magic {magic - 256 if magic > 127 else magic}")
    if length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch at position {pos} has length {length}, "
            f"below the v2 minimum {MIN_BATCH_LENGTH}"
        )
    size = length + LOG_OVERHEAD
    if max_batch_size is not None and size > max_batch_size:
        raise CorruptRecordError(
            f"record batch at position {pos} of {size} bytes exceeds {max_batch_size}",
            "MESSAGE_TOO_LARGE",
        )
    if size > remaining:
        return -1
    return size


def iter_batches(
    buf: BytesLike, max_batch_size: int | None = None
) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Split a record set into `(header, memoryview of the whole batch)`, without copying.

    Strict, for the produce path: a truncated final batch, a bad length or a non-v2 magic
    raises CorruptRecordError (reason CORRUPT_MESSAGE, UNSUPPORTED_FOR_MESSAGE_FORMAT for
    magic 0/1, MESSAGE_TOO_LARGE above `max_batch_size`). Errors surface while iterating;
    materialise the list first when all-or-nothing matters.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        size = _frame(view, pos, end, max_batch_size)
        if size < 0:
            raise CorruptRecordError(
                f"record set truncated: {end - pos} trailing bytes at position {pos} "
                "do not hold a whole batch"
            )
        yield _new_header(BatchHeader, _unpack_header(view, pos)), view[pos : pos + size]
        pos += size


def split_complete_batches(
    buf: BytesLike, max_batch_size: int | None = None
) -> tuple[list[tuple[BatchHeader, memoryview]], int]:
    """Split a record set, tolerating a truncated last batch.

    Returns `(batches, trailing_bytes)`: the whole batches as `(header, memoryview)` and the
    number of bytes after them that do not form a complete batch (log recovery truncates them;
    a fetch response may legally end with a partial batch). Damage other than truncation
    (bad length, bad magic) still raises CorruptRecordError.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    pos = 0
    batches: list[tuple[BatchHeader, memoryview]] = []
    while pos < end:
        size = _frame(view, pos, end, max_batch_size)
        if size < 0:
            break
        batches.append(
            (_new_header(BatchHeader, _unpack_header(view, pos)), view[pos : pos + size])
        )
        pos += size
    return batches, end - pos


def compute_crc(batch: BytesLike) -> int:
    """CRC32C of a whole batch from `attributes` (byte 21) to its end."""
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    crc: int = crc32c(view[ATTRIBUTES_OFFSET:])
    return crc


def verify_crc(batch: BytesLike, header: BatchHeader | None = None) -> bool:
    """True when the stored CRC (from `header` if given) matches the batch's bytes."""
    stored = header.crc if header is not None else _UINT32.unpack_from(batch, CRC_OFFSET)[0]
    return compute_crc(batch) == stored


def patch_crc(batch: WritableBytes) -> int:
    """Recompute and store the batch CRC in place; returns it."""
    crc = compute_crc(batch)
    _UINT32.pack_into(batch, CRC_OFFSET, crc)
    return crc


def patch_base_offset(batch: WritableBytes, base_offset: int) -> None:
    """Set baseOffset in place (outside the CRC: no recompute needed)."""
    _INT64.pack_into(batch, BASE_OFFSET_OFFSET, base_offset)


def patch_partition_leader_epoch(batch: WritableBytes, epoch: int) -> None:
    """Set partitionLeaderEpoch in place (outside the CRC: no recompute needed)."""
    _INT32.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, epoch)


def patch_max_timestamp(
    batch: WritableBytes, max_timestamp: int, timestamp_type: TimestampType | None = None
) -> bool:
    """Set maxTimestamp (and, if given, the timestamp type bit), recomputing the CRC.

    Mirrors Kafka's `setMaxTimestamp`: nothing is written when both already match.
    Returns True when the batch changed.
    """
    attributes = _INT16.unpack_from(batch, ATTRIBUTES_OFFSET)[0]
    new_attributes = attributes
    if timestamp_type is not None:
        if timestamp_type == TimestampType.LOG_APPEND_TIME:
            new_attributes = attributes | TIMESTAMP_TYPE_MASK
        else:
            new_attributes = attributes & ~TIMESTAMP_TYPE_MASK
    current = _INT64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0]
    if current == max_timestamp and new_attributes == attributes:
        return False
    _INT16.pack_into(batch, ATTRIBUTES_OFFSET, new_attributes)
    _INT64.pack_into(batch, MAX_TIMESTAMP_OFFSET, max_timestamp)
    patch_crc(batch)
    return True
