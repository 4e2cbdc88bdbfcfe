"""Topic configs the produce path applies on one node: compression.type (recompression),
message.timestamp.{before,after,difference}.max.ms (INVALID_TIMESTAMP with per-record errors)
and min.insync.replicas (acks=all gets NOT_ENOUGH_REPLICAS, as Kafka with one in-sync
replica)."""

from __future__ import annotations

import time

import pytest

from broker.broker_helpers import (
    create,
    produce_partitions,
)
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import split_complete_batches
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType
from onceflow.records.record import decode_records


def produce(state, batch, acks=-1, version=9, topic="t"):
    return produce_partitions(state, topic, {0: batch}, version, acks)[(topic, 0)]


def stored(state, topic="t"):
    """(codec, header, records) of every batch in partition 0."""
    result = state.get_log(topic, 0).read(0, 1 << 30)
    batches, _ = split_complete_batches(result.records)
    return [(h.compression, h, decode_records(view)) for h, view in batches]


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("sent", [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])
def test_compression_type_rewrites_batches_to_the_topics_codec(state, target, sent):
    create(state, "t", 1, **{"compression.type": target})
    builder = BatchBuilder(
        compression=sent, producer_id=7, producer_epoch=2, base_sequence=0, is_transactional=False
    )
    for i in range(20):
        builder.append(1_000 + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)])
    answer = produce(state, builder.build())
    assert answer.error_code == ErrorCode.NONE and answer.base_offset == 0
    [(codec, header, records)] = stored(state)
    assert CompressionType(codec).name.lower().replace("none", "uncompressed") == target
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 0)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k%d" % i, b"v" * i, [("h", b"%d" % i)]) for i in range(20)
    ]
    assert [header.base_timestamp + r.timestamp_delta for r in records] == list(range(1000, 1020))
    # a retry of the same batch is still recognised as a duplicate
    builder2 = BatchBuilder(compression=sent, producer_id=7, producer_epoch=2, base_sequence=0)
    for i in range(20):
        builder2.append(1_000 + i, b"k%d" % i, b"v" * i, [("h", b"%d" % i)])
    assert produce(state, builder2.build()).base_offset == 0
    assert state.get_log("t", 0).log_end_offset == 20


def test_producer_compression_type_stores_batches_as_sent(state):
    create(state, "t", 1)  # compression.type=producer, the default
    builder = BatchBuilder(compression=CompressionType.LZ4)
    builder.append(1, None, b"x")
    batch = builder.build()
    produce(state, batch)
    [(codec, _, _)] = stored(state)
    assert codec == CompressionType.LZ4
    # verbatim from the magic byte on (the broker patches base offset and leader epoch)
    assert bytes(state.get_log("t", 0).read(0, 1 << 20).records)[16:] == bytes(batch)[16:]


def batch_at(*timestamps):
    builder = BatchBuilder()
    for ts in timestamps:
        builder.append(ts, b"k", b"v")
    return builder.build()


@pytest.mark.parametrize("version", [3, 7, 8, 9, 12])
def test_timestamps_outside_the_topics_limits_are_invalid_timestamp(state, version):
    create(
        state, "t", 1,
        **{"message.timestamp.before.max.ms": 3_600_000, "message.timestamp.after.max.ms": 60_000},
    )  # fmt: skip
    now = int(time.time() * 1000)
    ok = produce(state, batch_at(now - 3_000_000, now, now + 30_000), version=version)
    assert ok.error_code == ErrorCode.NONE
    bad = produce(state, batch_at(now, now - 7_200_000, now, now + 600_000), version=version)
    assert bad.error_code == ErrorCode.INVALID_TIMESTAMP and bad.base_offset == -1
    assert state.get_log("t", 0).log_end_offset == 3
    if version >= 8:
        assert [e.batch_index for e in bad.record_errors] == [1, 3]
        assert "is out of range" in bad.record_errors[0].batch_index_error_message


def test_difference_max_ms_bounds_both_sides_and_log_append_time_is_exempt(state):
    create(state, "t", 1, **{"message.timestamp.difference.max.ms": 1000})
    create(state, "la", 1, **{"message.timestamp.difference.max.ms": 1000,
                               "message.timestamp.type": "LogAppendTime"})  # fmt: skip
    now = int(time.time() * 1000)
    assert produce(state, batch_at(now - 100_000)).error_code == ErrorCode.INVALID_TIMESTAMP
    assert produce(state, batch_at(now + 100_000)).error_code == ErrorCode.INVALID_TIMESTAMP
    assert produce(state, batch_at(now - 100_000), topic="la").error_code == ErrorCode.NONE


def test_min_insync_replicas_above_one_refuses_acks_all_only(state):
    create(state, "t", 1, **{"min.insync.replicas": 2})
    refused = produce(state, batch_at(1), acks=-1)
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert "min.isr requirement of 2" in refused.error_message
    assert produce(state, batch_at(1), acks=1).error_code == ErrorCode.NONE
    assert state.get_log("t", 0).log_end_offset == 1
