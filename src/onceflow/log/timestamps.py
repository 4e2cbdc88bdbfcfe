"""Offset lookup by timestamp (ListOffsets) over a partition's segments.

Kafka's algorithm: the first segment whose largest timestamp reaches the target; in it, the
time index gives a batch at or before the answer; a header scan from there finds the first batch
whose max timestamp reaches the target, and decoding that batch's records finds the first record
that does (Kafka answers with a record offset, not a batch offset). For LogAppendTime batches
every record carries the batch's max timestamp, so no decoding is needed.
"""

from __future__ import annotations

from collections.abc import Sequence

from onceflow.log.segment import LogSegment
from onceflow.records.batch import BatchHeader, TimestampType
from onceflow.records.record import decode_records

MAX_TIMESTAMP = -3


def find_offset_by_timestamp(
    segments: Sequence[LogSegment], timestamp: int, log_start_offset: int, upper_bound: int
) -> tuple[int, int] | None:
    """`(record timestamp, offset)` of the first record at or after `log_start_offset` with a
    timestamp >= `timestamp` and an offset below `upper_bound`; -3 finds the record with the
    largest timestamp (KIP-734). None when there is no such record.
    """
    if timestamp == MAX_TIMESTAMP:
        return _max_timestamp(segments, log_start_offset, upper_bound)
    for segment in segments:
        if segment.base_offset >= upper_bound:
            return None
        if segment.max_timestamp < timestamp or segment.next_offset <= log_start_offset:
            continue
        _, indexed_offset = segment.time_index.lookup(timestamp)
        _, position = segment.offset_index.lookup(indexed_offset)
        for batch_position, header in segment.iter_headers(position):
            if header.base_offset >= upper_bound:
                return None
            last = header.base_offset + header.last_offset_delta
            if header.max_timestamp < timestamp or last < log_start_offset:
                continue
            found = _first_record_at(segment, batch_position, header, timestamp, log_start_offset)
            if found is not None and found[1] < upper_bound:
                return found
            if found is not None:
                return None
    return None


def _first_record_at(
    segment: LogSegment, position: int, header: BatchHeader, timestamp: int, start: int
) -> tuple[int, int] | None:
    """The first record of the batch at `position` with timestamp >= target and offset >= start."""
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return header.max_timestamp, max(header.base_offset, start)
    records = decode_records(segment.read_at(position, header.total_size))
    for record in records:
        offset = header.base_offset + record.offset_delta
        record_ts = header.base_timestamp + record.timestamp_delta
        if offset >= start and record_ts >= timestamp:
            return record_ts, offset
    return None


def _max_timestamp(
    segments: Sequence[LogSegment], log_start_offset: int, upper_bound: int
) -> tuple[int, int] | None:
    """The first record with the largest timestamp below the upper bound.

    Uses each segment's remembered max timestamp and its offset; scans headers only when that
    offset lies outside `[log_start_offset, upper_bound)`.
    """
    best: tuple[int, int] | None = None
    for segment in segments:
        if segment.base_offset >= upper_bound:
            break
        if segment.next_offset <= log_start_offset or segment.max_timestamp < 0:
            continue
        if best is not None and segment.max_timestamp <= best[0]:
            continue
        found = None
        if log_start_offset <= segment.offset_of_max_timestamp < upper_bound:
            position = segment.translate_offset(segment.offset_of_max_timestamp)
            for batch_position, header in segment.iter_headers(position or 0):
                found = _first_record_at(
                    segment, batch_position, header, header.max_timestamp, log_start_offset
                )
                break
        else:
            found = _scan_max(segment, log_start_offset, upper_bound)
        if found is not None and (best is None or found[0] > best[0]):
            best = found
    return best


def _scan_max(
    segment: LogSegment, log_start_offset: int, upper_bound: int
) -> tuple[int, int] | None:
    """Header scan of one segment for the first batch with the largest timestamp in range."""
    best: tuple[int, int] | None = None
    for position, header in segment.iter_headers(0):
        if header.base_offset >= upper_bound:
            break
        last = header.base_offset + header.last_offset_delta
        if last < log_start_offset or header.max_timestamp < 0:
            continue
        if best is None or header.max_timestamp > best[0]:
            found = _first_record_at(
                segment, position, header, header.max_timestamp, log_start_offset
            )
            if found is not None:
                best = found
    return best
