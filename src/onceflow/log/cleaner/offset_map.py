"""The offset map of a cleaning pass: each key's latest offset in the dirty section (Kafka's
`SkimpyOffsetMap`, here an exact dict: keys are not hashed to 16 bytes, so no collision can
remove a live record; its size is bounded by the number of distinct keys in the section).

Records of aborted transactions and control batches do not enter the map; neither do records
without a key. The pass reads records only as far as their keys (`records.record_scan`).

Besides the map, the pass notes what lets the cleaning pass skip reading most dirty batches:
which offsets hold a tombstone, and which batches hold a record without a key. A data batch of
the dirty section that is not aborted and has no keyless record keeps exactly the records whose
offsets are the latest of their keys (`latest_in`): no need to read its records to know.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator

from onceflow.common import NO_PRODUCER_ID
from onceflow.log.cleaner.transactions import CleanedTransactions
from onceflow.log.segment import LogSegment
from onceflow.records.batch import BatchHeader
from onceflow.records.record_scan import scan_batch


def iter_batches_of(
    segment: LogSegment, start_offset: int = 0
) -> Iterator[tuple[BatchHeader, bytes]]:
    """`(header, batch bytes)` of each batch of `segment` whose last offset is at or after
    `start_offset`."""
    for position, header in segment.iter_headers(0):
        if header.last_offset < start_offset:
            continue
        yield header, segment.read_at(position, header.total_size)


class OffsetMap:
    """Key -> offset of its last record in `[start, end)` of a log, and what the pass saw."""

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self.offsets: dict[bytes, int] = {}
        self.tombstones: set[int] = set()  # offsets of tombstones (superseded ones too)
        self.keyless_batches: set[int] = set()  # base offsets of batches with a keyless record
        self._latest: list[int] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def get(self, key: bytes, default: int) -> int:
        """The latest offset of `key`, `default` if the section has none."""
        return self.offsets.get(key, default)

    def covers(self, header: BatchHeader) -> bool:
        """Whether every record of this (non-aborted data) batch entered the map, so that
        `latest_in` tells exactly which of them stay."""
        return (
            self.start <= header.base_offset
            and header.last_offset < self.end
            and header.base_offset not in self.keyless_batches
        )

    def latest_in(self, base_offset: int, last_offset: int) -> list[int]:
        """The offsets in `[base_offset, last_offset]` that are the latest of their key."""
        if self._latest is None:
            self._latest = sorted(self.offsets.values())
        latest = self._latest
        return latest[bisect_left(latest, base_offset) : bisect_right(latest, last_offset)]


def build_offset_map(
    segments: Iterable[LogSegment], start: int, end: int, aborted: Iterable[tuple[int, int]]
) -> OffsetMap:
    """The offset map of `[start, end)` of `segments`."""
    result = OffsetMap(start, end)
    offsets, tombstones = result.offsets, result.tombstones
    txns = CleanedTransactions(aborted)
    for segment in segments:
        for header, data in iter_batches_of(segment, start):
            if header.base_offset >= end:
                return result
            pid = header.producer_id
            if header.is_control:
                if pid != NO_PRODUCER_ID:
                    txns.marker(pid, header.base_offset)
                continue
            if header.is_transactional and txns.data_batch(pid, header.base_offset):
                continue
            scanned = scan_batch(data)
            base = header.base_offset
            for delta, key, tombstone in zip(
                scanned.offset_deltas, scanned.keys, scanned.tombstones, strict=True
            ):
                offset = base + delta
                if key is None:
                    result.keyless_batches.add(base)
                elif offset >= start:
                    offsets[key] = offset
                    if tombstone:
                        tombstones.add(offset)
    return result
