"""Checks and rewrites of produced batches before they reach a log (Kafka's `LogValidator`).

The produce path parses a record set once (the Produce handler splits it into batches and
checks the request's shape, as Kafka's `ProduceRequest.validateRecords`); everything about the
batch itself is decided here, and the parsed header travels on to `PartitionLog.append`
(`headers=`), which then does not parse it again.

- `validate_produced` is the one validator of a client's batch, in Kafka's order: its size
  against the topic's `max.message.bytes` (MESSAGE_TOO_LARGE); the header and CRC
  (`validate_batch`: CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_FOR_MESSAGE_FORMAT); on a
  compacted topic a key on every record (`check_records_of`: INVALID_RECORD, one error per
  keyless record); on a CreateTime topic with `message.timestamp.before.max.ms` /
  `after.max.ms` (or the deprecated `difference.max.ms`, which bounds both) set, every
  record's timestamp within that distance of the broker's clock (`out_of_range_timestamps`:
  INVALID_TIMESTAMP, one error per record outside). Records are only decoded when one of
  these topic configs asks for it (the defaults do not).
- `compression.type` other than `producer` is the codec the topic stores: `stored_form` /
  `recompress` rebuild a batch whose codec differs (records, offsets deltas, timestamps,
  producer id, epoch, sequence and transactional flag kept; a new CRC). This is the one place
  the broker re-encodes records, as Kafka does for the same setting. Otherwise batches are
  stored as the producer sent them.
"""

from __future__ import annotations

from typing import NamedTuple

from onceflow.common import NO_PRODUCER_ID
from onceflow.log.config import MAX_INT64, LogConfig
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import (
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    compute_crc,
    parse_header,
)
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import decode_batch_columns, decode_records

__all__ = [
    "ACCEPTED",
    "Rejection",
    "check_records_of",
    "out_of_range_timestamps",
    "recompress",
    "stored_form",
    "target_compression",
    "validate_batch",
    "validate_produced",
]

_CODECS = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
_MAX_CODEC = 4  # zstd


class Rejection(NamedTuple):
    """Why a batch may not be appended (error NONE: it may); `record_errors` holds
    `(batch index, message)` of each bad record when the error is about records."""

    error: ErrorCode
    message: str | None = None
    record_errors: tuple[tuple[int, str], ...] = ()


ACCEPTED = Rejection(ErrorCode.NONE)


def validate_produced(
    header: BatchHeader,
    batch: bytes | bytearray | memoryview,
    config: LogConfig,
    partition: str,
    now_ms: int,
) -> Rejection:
    """Check one client batch bound for the log of `partition` (its `<topic>-<n>` name, for
    messages) with topic config `config`; ACCEPTED or the first rejection, in Kafka's order."""
    limit = config.max_message_bytes
    if header.total_size > limit:
        return Rejection(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"record batch of {header.total_size} bytes exceeds max.message.bytes={limit}",
        )
    error = validate_batch(header, batch, from_client=True)
    if error is None and "compact" in config.cleanup_policy:
        error, keyless = check_records_of(batch, compacted=True)
        if keyless:
            message = (
                f"Compacted topic cannot accept message without key in topic partition {partition}"
            )
            return _record_errors(ErrorCode.INVALID_RECORD, [(i, message) for i in keyless])
    if error is not None and error != ErrorCode.NONE:
        return Rejection(ErrorCode(error), f"record batch rejected: {ErrorCode(error).name}")
    late = out_of_range_timestamps(header, batch, config, now_ms)
    if late:
        return _record_errors(ErrorCode.INVALID_TIMESTAMP, late)
    return ACCEPTED


def _record_errors(error: ErrorCode, records: list[tuple[int, str]]) -> Rejection:
    """`error` for the batch naming every bad record, with Kafka's summary message (showing
    the first three)."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in records[:3])
    summary = (
        f"One or more records have been rejected due to {len(records)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]"
    )
    return Rejection(error, summary, tuple(records))


def validate_batch(
    header: BatchHeader,
    batch: bytes | bytearray | memoryview,
    *,
    from_client: bool = True,
    check_records: bool = False,
    compacted: bool = False,
) -> ErrorCode | None:
    """Check a produced batch as Kafka's `LogValidator` does; return an ErrorCode or None.

    Always checked: magic 2 (0/1 -> UNSUPPORTED_FOR_MESSAGE_FORMAT, others -> CORRUPT_MESSAGE),
    the batch length against the buffer, a known codec, the CRC (CORRUPT_MESSAGE). From clients
    (`from_client`): records_count >= 1 and equal to last_offset_delta + 1, no control batches,
    a base sequence >= 0 when a producer id is set, a producer id on transactional batches
    (all INVALID_RECORD). `check_records` also decodes the records (decompressing) and checks
    their count, that offset deltas run 0..n-1, and with `compacted` that every key is set.
    The base offset is not checked: Kafka overwrites it.
    """
    if header.magic != MAGIC:
        if header.magic in (0, 1):
            return ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
        return ErrorCode.CORRUPT_MESSAGE
    if header.batch_length < MIN_BATCH_LENGTH or header.total_size != len(batch):
        return ErrorCode.CORRUPT_MESSAGE
    if header.compression > _MAX_CODEC:
        return ErrorCode.CORRUPT_MESSAGE
    if compute_crc(batch) != header.crc:
        return ErrorCode.CORRUPT_MESSAGE
    if from_client:
        if header.records_count <= 0 or header.last_offset_delta < 0:
            return ErrorCode.INVALID_RECORD
        if header.last_offset_delta + 1 != header.records_count:
            return ErrorCode.INVALID_RECORD
        if header.is_control:
            return ErrorCode.INVALID_RECORD
        if header.producer_id != NO_PRODUCER_ID and header.base_sequence < 0:
            return ErrorCode.INVALID_RECORD
        # onceflow check: a transactional batch without a producer id cannot be tracked.
        if header.is_transactional and header.producer_id == NO_PRODUCER_ID:
            return ErrorCode.INVALID_RECORD
    if check_records:
        return check_records_of(batch, compacted=compacted)[0]
    return None


def check_records_of(
    batch: bytes | bytearray | memoryview, *, compacted: bool = False
) -> tuple[ErrorCode | None, list[int]]:
    """Decode a batch's records (decompressing) and check them as Kafka's `LogValidator` does.

    Returns `(error, keyless)`: CORRUPT_MESSAGE when the records do not decode, INVALID_RECORD
    when their offset deltas do not run 0..n-1 (a batch-level error, `keyless` empty); with
    `compacted`, INVALID_RECORD and the batch indexes of every record without a key (Kafka
    reports those as per-record errors); `(None, [])` when all is well.
    """
    try:
        records = decode_records(batch)
    except CorruptRecordError:
        return ErrorCode.CORRUPT_MESSAGE, []
    keyless: list[int] = []
    for expected, record in enumerate(records):
        if record.offset_delta != expected:
            return ErrorCode.INVALID_RECORD, []
        if compacted and record.key is None:
            keyless.append(expected)
    if keyless:
        return ErrorCode.INVALID_RECORD, keyless
    return None, []


def out_of_range_timestamps(
    header: BatchHeader, batch: bytes | bytearray | memoryview, config: LogConfig, now_ms: int
) -> list[tuple[int, str]]:
    """(batch index, message) of each record whose timestamp is outside the topic's limits."""
    if config.log_append_time:  # the broker's clock stamps these batches
        return []
    before = min(config.message_timestamp_before_max_ms, config.message_timestamp_difference_max_ms)
    after = min(config.message_timestamp_after_max_ms, config.message_timestamp_difference_max_ms)
    if before == MAX_INT64 and after == MAX_INT64:
        return []
    low = now_ms - before if before != MAX_INT64 else -MAX_INT64
    high = now_ms + after if after != MAX_INT64 else MAX_INT64
    base = header.base_timestamp
    if before == MAX_INT64 and header.max_timestamp <= high:
        return []  # no lower limit, and the latest record is not too late
    out = []
    for index, delta in enumerate(decode_batch_columns(batch).timestamp_deltas):
        timestamp = base + delta
        if timestamp != -1 and not low <= timestamp <= high:
            out.append(
                (
                    index,
                    f"Timestamp {timestamp} of message with offset {index} is out of range. "
                    f"The timestamp should be within [{low}, {high}]",
                )
            )
    return out


def stored_form(
    header: BatchHeader, batch: bytes | bytearray | memoryview, config: LogConfig
) -> tuple[BatchHeader, bytes | bytearray | memoryview]:
    """`(header, batch)` as the topic stores the batch: recompressed when its compression.type
    says so (then with the new batch's header), else the batch as sent."""
    codec = target_compression(header, config)
    if codec is None:
        return header, batch
    rebuilt = recompress(header, batch, codec)
    return parse_header(rebuilt), rebuilt


def target_compression(header: BatchHeader, config: LogConfig) -> CompressionType | None:
    """The codec to rewrite this batch with, or None to store it as sent."""
    target = _CODECS.get(config.compression_type)
    if target is None or target == header.compression:
        return None
    return target


def recompress(
    header: BatchHeader, batch: bytes | bytearray | memoryview, codec: CompressionType
) -> bytearray:
    """The same records in a new batch with `codec`."""
    columns = decode_batch_columns(batch)
    builder = BatchBuilder(
        compression=codec,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        timestamp_type=header.timestamp_type,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    base = header.base_timestamp
    for delta, key, value, headers in zip(
        columns.timestamp_deltas, columns.keys, columns.values, columns.headers, strict=True
    ):
        builder.append(base + delta, key, value, headers)
    return builder.build()
