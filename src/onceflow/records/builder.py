"""Build a v2 record batch from records, as a producer does (clients, tests, markers).

The batch is laid out as Kafka's `MemoryRecordsBuilder` writes it: base offset 0 (the broker
assigns the real one), offset deltas 0..n-1, baseTimestamp = the first record's timestamp,
maxTimestamp = the largest, partitionLeaderEpoch -1, the records section compressed as a whole,
and the CRC32C set last.
"""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, wall_clock_ms
from onceflow.records.batch import (
    CONTROL_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    TimestampType,
    patch_crc,
)
from onceflow.records.compression import CompressionType, compress
from onceflow.records.record import Header, encode_record

__all__ = ["BatchBuilder"]


class BatchBuilder:
    """Accumulates records with `append` and produces one v2 batch with `build`."""

    def __init__(
        self,
        compression: int = CompressionType.NONE,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        *,
        is_control: bool = False,
        base_offset: int = 0,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        self.compression = CompressionType(compression)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.timestamp_type = TimestampType(timestamp_type)
        self.is_control = is_control
        self.base_offset = base_offset
        self.partition_leader_epoch = partition_leader_epoch
        self._records = bytearray()
        self._count = 0
        self._base_timestamp: int | None = None
        self._max_timestamp = -1

    def __len__(self) -> int:
        """Number of records appended so far."""
        return self._count

    @property
    def uncompressed_size(self) -> int:
        """Bytes of the batch so far before compression (header included)."""
        return HEADER_SIZE + len(self._records)

    def append(
        self,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int:
        """Add a record (timestamp in ms, None for now); returns its offset delta."""
        if timestamp is None:
            timestamp = wall_clock_ms()
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        offset_delta = self._count
        encode_record(
            self._records, offset_delta, timestamp - self._base_timestamp, key, value, headers
        )
        self._count += 1
        return offset_delta

    def attributes(self) -> int:
        """The batch attributes these settings produce."""
        attributes = int(self.compression)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self.is_transactional:
            attributes |= TRANSACTIONAL_MASK
        if self.is_control:
            attributes |= CONTROL_MASK
        return attributes

    def build(self) -> bytearray:
        """Return the finished batch (a fresh bytearray, CRC set). Needs at least one record."""
        if not self._count:
            raise ValueError("a record batch needs at least one record")
        body = compress(self.compression, self._records)
        batch = bytearray(HEADER_SIZE + len(body))
        HEADER_STRUCT.pack_into(
            batch,
            0,
            self.base_offset,
            len(batch) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            MAGIC,
            0,  # crc, set below
            self.attributes(),
            self._count - 1,
            self._base_timestamp,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        )
        batch[HEADER_SIZE:] = body
        patch_crc(batch)
        return batch
