"""Record-level checks and rewrites a topic's configuration asks for (Kafka's `LogValidator`).

Batches are stored as the producer sent them, except where a topic config says otherwise:

- `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms` (and the deprecated
  `message.timestamp.difference.max.ms`, which bounds both) limit, on CreateTime topics, how
  far a record's timestamp may lie before or after the broker's clock; `out_of_range_timestamps`
  names every record outside, and the whole batch is then INVALID_TIMESTAMP. Records are only
  decoded when a limit is set (the defaults are unlimited).
- `compression.type` other than `producer` is the codec the topic stores: `recompress`
  rebuilds a batch whose codec differs (records, offsets deltas, timestamps, producer id,
  epoch, sequence and transactional flag kept; a new CRC). This is the one place the broker
  re-encodes records, as Kafka does for the same setting.
"""

from __future__ import annotations

from onceflow.log.config import MAX_INT64, LogConfig
from onceflow.records.batch import BatchHeader
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType
from onceflow.records.record import decode_batch_columns

__all__ = ["out_of_range_timestamps", "recompress", "target_compression"]

_CODECS = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


def out_of_range_timestamps(
    header: BatchHeader, batch, config: LogConfig, now_ms: int
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


def target_compression(header: BatchHeader, config: LogConfig) -> CompressionType | None:
    """The codec to rewrite this batch with, or None to store it as sent."""
    target = _CODECS.get(config.compression_type)
    if target is None or target == header.compression:
        return None
    return target


def recompress(header: BatchHeader, batch, codec: CompressionType) -> bytearray:
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
