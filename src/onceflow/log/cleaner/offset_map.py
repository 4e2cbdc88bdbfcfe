"""The offset map of a cleaning pass: each key's latest offset in the dirty section (Kafka's
`SkimpyOffsetMap`, here an exact dict: keys are not hashed to 16 bytes, so no collision can
remove a live record; its size is bounded by the number of distinct keys in the section).

Records of aborted transactions and control batches do not enter the map; neither do records
without a key.
"""

from __future__ import annotations

from collections.abc import Iterable

from onceflow.log.cleaner.transactions import CleanedTransactions
from onceflow.log.segment import LogSegment
from onceflow.records.batch import NO_PRODUCER_ID
from onceflow.records.record import decode_batch_columns


def iter_batches_of(segment: LogSegment, start_offset: int = 0):
    """`(header, batch bytes)` of each batch of `segment` whose last offset is at or after
    `start_offset`."""
    for position, header in segment.iter_headers(0):
        if header.last_offset < start_offset:
            continue
        yield header, segment.read_at(position, header.total_size)


def build_offset_map(
    segments: Iterable[LogSegment], start: int, end: int, aborted: Iterable[tuple[int, int]]
) -> dict[bytes, int]:
    """Key -> offset of its last record in `[start, end)` of `segments`."""
    offsets: dict[bytes, int] = {}
    txns = CleanedTransactions(aborted)
    for segment in segments:
        for header, data in iter_batches_of(segment, start):
            if header.base_offset >= end:
                return offsets
            pid = header.producer_id
            if header.is_control:
                if pid != NO_PRODUCER_ID:
                    txns.marker(pid, header.base_offset)
                continue
            if header.is_transactional and txns.data_batch(pid, header.base_offset):
                continue
            columns = decode_batch_columns(data)
            base = header.base_offset
            for delta, key in zip(columns.offset_deltas, columns.keys, strict=True):
                if key is not None and base + delta >= start:
                    offsets[key] = base + delta
    return offsets
