"""Shared helpers for the log tests: build batches with BatchBuilder, inspect record sets."""

from __future__ import annotations

from onceflow.log.config import LogConfig
from onceflow.log.partition import PartitionLog
from onceflow.records.batch import BatchHeader, split_complete_batches
from onceflow.records.builder import BatchBuilder
from onceflow.records.record import decode_records


def make_batch(
    count: int = 1,
    *,
    value_size: int = 10,
    timestamp: int = 1_000,
    timestamps: list[int] | None = None,
    tag: bytes = b"v",
    **builder_args,
) -> bytearray:
    """A v2 batch of `count` records (values `tag` padded to `value_size`); `builder_args` go
    to `BatchBuilder` (producer id, compression, ...)."""
    builder = BatchBuilder(**builder_args)
    stamps = timestamps if timestamps is not None else [timestamp + i for i in range(count)]
    for i, ts in enumerate(stamps):
        value = (tag + b"-%d-" % i).ljust(value_size, b".")
        builder.append(ts, b"key-%d" % i, value)
    return builder.build()


def headers_of(records) -> list[BatchHeader]:
    """Headers of the whole batches in a record set (asserts there is no partial tail)."""
    batches, trailing = split_complete_batches(records)
    assert trailing == 0
    return [header for header, _ in batches]


def record_offsets(records) -> list[int]:
    """Absolute offset of every record in a record set."""
    offsets = []
    batches, _ = split_complete_batches(records)
    for header, view in batches:
        offsets.extend(header.base_offset + r.offset_delta for r in decode_records(view))
    return offsets


def record_values(records) -> list[bytes]:
    """Value of every record in a record set."""
    batches, _ = split_complete_batches(records)
    return [r.value for _, view in batches for r in decode_records(view)]


def open_log(path, config: LogConfig | None = None, **kwargs) -> PartitionLog:
    """A PartitionLog for topic `t`, partition 0, under `path`."""
    return PartitionLog(str(path), "t", 0, config or LogConfig(), **kwargs)


def fill(log: PartitionLog, batches: int, records_per_batch: int = 1, **batch_kwargs) -> None:
    """Append `batches` single-batch record sets."""
    for _ in range(batches):
        result = log.append(make_batch(records_per_batch, **batch_kwargs))
        assert result.error == 0, result
