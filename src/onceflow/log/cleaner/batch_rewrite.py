"""Rewrite one record batch with a subset of its records, as Kafka's `MemoryRecords.filterTo`.

The broker never re-encodes batches on the produce path; only the cleaner does, and only for
batches that lose records or get a delete horizon. The new batch keeps everything of the
original header but the records: base offset, last offset delta (so the batch still covers the
same offsets, Kafka's `overrideLastOffset`), partition leader epoch, attributes (codec,
timestamp type, transactional, control), max timestamp, producer id, epoch and base sequence.
Its records keep their offset deltas and absolute timestamps; the records section is
compressed again with the batch's codec (`records.compression`), the CRC32C recomputed.

The kept records are never decoded: their bytes, as the key-only scan found them
(`records.record_scan`), are concatenated as they are. Only when the new batch's base timestamp
differs from the old one (the first record went, or a delete horizon is set) is each record's
timestamp delta re-encoded, its key, value and headers still copied as bytes.

A batch whose records are all removed may be kept as a header with no records (Kafka's
`writeEmptyHeader`): its producer id, epoch and sequence range survive, so the idempotent
producer's next sequence does too (seed 002).

KIP-534: a batch holding tombstones or a transaction marker the cleaner will remove later
carries the delete horizon: attribute bit 6 set and the base timestamp = the horizon.
"""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.records.batch import (
    COMPRESSION_MASK,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    patch_crc,
)
from onceflow.records.compression import compress
from onceflow.records.record_scan import ScannedRecords, reframe_record


def rebuild_batch(
    header: BatchHeader,
    records: ScannedRecords | None,
    kept: Sequence[int],
    delete_horizon_ms: int | None = None,
) -> bytearray:
    """A batch like `header`'s holding only the records of `records` (the batch's records,
    scanned) whose indexes are in `kept` (ascending).

    `delete_horizon_ms` sets the delete horizon (KIP-534); a batch that already has one keeps
    it. With nothing kept the result is an empty header (`records` may then be None).
    """
    attributes = header.attributes
    first_timestamp = header.base_timestamp  # absolute timestamp base of the old deltas
    if delete_horizon_ms is not None and not header.has_delete_horizon:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    elif header.has_delete_horizon:
        base_timestamp = header.base_timestamp
    elif kept and records is not None:
        base_timestamp = first_timestamp + records.timestamp_deltas[kept[0]]
    else:
        base_timestamp = header.max_timestamp
    count = len(kept) if records is not None else 0
    body = bytearray()
    if records is not None:
        shift = first_timestamp - base_timestamp
        deltas = records.timestamp_deltas
        for index in kept:
            body += reframe_record(records, index, deltas[index] + shift)
    if count:
        body = bytearray(compress(header.compression, body))
    else:  # Kafka's empty header is uncompressed
        attributes &= ~COMPRESSION_MASK
    batch = bytearray(HEADER_SIZE + len(body))
    HEADER_STRUCT.pack_into(
        batch,
        0,
        header.base_offset,
        len(batch) - LOG_OVERHEAD,
        header.partition_leader_epoch,
        MAGIC,
        0,  # crc, set below
        attributes,
        header.last_offset_delta,
        base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    batch[HEADER_SIZE:] = body
    patch_crc(batch)
    return batch
