"""BatchBuilder -> parse_header -> decode_records round trips for every codec."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.log.validator import validate_batch
from onceflow.records.batch import (
    TimestampType,
    iter_batches,
    parse_header,
    patch_crc,
    verify_crc,
)
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import decode_records

NULLABLE_BYTES = st.none() | st.binary(max_size=200)
ENTRIES = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        NULLABLE_BYTES,
        NULLABLE_BYTES,
        st.lists(st.tuples(st.text(max_size=10), NULLABLE_BYTES), max_size=3),
    ),
    min_size=1,
    max_size=30,
)


@settings(deadline=None, max_examples=80)
@given(
    entries=ENTRIES,
    codec=st.sampled_from(list(CompressionType)),
    producer=st.sampled_from([(-1, -1, -1, False), (7, 0, 0, False), (2**40, 3, 2**31 - 2, True)]),
)
def test_build_parse_decode(entries, codec, producer):
    producer_id, producer_epoch, base_sequence, transactional = producer
    builder = BatchBuilder(codec, producer_id, producer_epoch, base_sequence, transactional)
    for entry in entries:
        builder.append(*entry)
    assert len(builder) == len(entries)
    batch = builder.build()
    header = parse_header(batch)
    assert header.total_size == len(batch)
    assert header.compression == codec
    assert header.is_transactional == transactional and not header.is_control
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer[:3]
    assert header.records_count == len(entries) == header.last_offset_delta + 1
    assert header.base_timestamp == entries[0][0]
    assert header.max_timestamp == max(e[0] for e in entries)
    assert verify_crc(batch, header)
    assert validate_batch(header, batch, check_records=True) is None
    records = decode_records(batch)
    assert [r.offset_delta for r in records] == list(range(len(entries)))
    for record, (timestamp, key, value, headers) in zip(records, entries, strict=True):
        assert header.base_timestamp + record.timestamp_delta == timestamp
        assert (record.key, record.value, record.headers) == (key, value, headers)


def test_log_append_time_and_leader_epoch():
    builder = BatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME, partition_leader_epoch=4)
    builder.append(None, None, b"v")
    header = parse_header(builder.build())
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.partition_leader_epoch == 4
    assert header.base_timestamp > 1_600_000_000_000  # None means now


def test_empty_builder_cannot_build():
    with pytest.raises(ValueError):
        BatchBuilder().build()


def test_build_returns_independent_batches():
    builder = BatchBuilder()
    builder.append(1, b"k", b"v")
    first = builder.build()
    builder.append(2, b"k", b"v")
    second = builder.build()
    assert parse_header(first).records_count == 1 and parse_header(second).records_count == 2


@pytest.mark.parametrize("codec", list(CompressionType))
def test_decode_detects_count_mismatch_under_a_valid_crc(codec):
    builder = BatchBuilder(codec)
    for i in range(3):
        builder.append(i, b"k", b"v")
    batch = builder.build()
    batch[60] = 4  # records_count 3 -> 4 (low byte), CRC made valid again
    patch_crc(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_decode_detects_corrupt_compressed_body(codec):
    builder = BatchBuilder(codec)
    for i in range(50):
        builder.append(i, b"k", b"value %d" % i * 20)
    batch = builder.build()
    batch[70:80] = b"\xff" * 10
    patch_crc(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


def test_decode_records_needs_the_exact_batch():
    builder = BatchBuilder()
    builder.append(0, b"k", b"v")
    batch = builder.build()
    with pytest.raises(CorruptRecordError):
        decode_records(batch + b"\x00")
    ((header, view),) = iter_batches(batch + batch[:0])
    assert decode_records(view)[0].value == b"v"
