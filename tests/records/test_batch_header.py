"""v2 batch header: parsing, framing, CRC and in-place patches (validation: tests/log)."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    TimestampType,
    compute_crc,
    increment_sequence,
    iter_batches,
    parse_header,
    patch_base_offset,
    patch_crc,
    patch_max_timestamp,
    patch_partition_leader_epoch,
    split_complete_batches,
    verify_crc,
)
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType
from onceflow.records.errors import CorruptRecordError


def make_batch(count=3, **kwargs) -> bytearray:
    builder = BatchBuilder(**kwargs)
    for i in range(count):
        builder.append(1_700_000_000_000 + i, b"key-%d" % i, b"value-%d" % i, [("h", b"v")])
    return builder.build()


def test_header_fields_and_properties():
    batch = make_batch(
        count=4,
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        is_transactional=True,
        compression=CompressionType.GZIP,
    )
    header = parse_header(batch)
    assert isinstance(header, BatchHeader)
    assert header.magic == 2
    assert header.base_offset == 0
    assert header.partition_leader_epoch == -1
    assert header.total_size == header.batch_length + 12 == len(batch)
    assert header.records_count == 4 and header.last_offset_delta == 3
    assert header.base_timestamp == 1_700_000_000_000
    assert header.max_timestamp == 1_700_000_000_003
    assert header.producer_id == 42 and header.producer_epoch == 3 and header.base_sequence == 7
    assert header.compression == CompressionType.GZIP
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert header.is_transactional and not header.is_control and not header.has_delete_horizon
    assert header.has_producer_id
    assert header.last_offset == 3 and header.next_offset == 4
    assert header.last_sequence == 10
    assert header.crc == compute_crc(batch)


def test_attribute_bits():
    fields = dict(
        base_offset=0,
        batch_length=49,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        last_offset_delta=0,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=1,
    )
    header = BatchHeader(attributes=0b0111_1100 | 4, **fields)
    assert header.compression == 4
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.is_transactional and header.is_control and header.has_delete_horizon
    plain = BatchHeader(attributes=0, **fields)
    assert not (plain.is_transactional or plain.is_control or plain.has_delete_horizon)
    assert not plain.has_producer_id and plain.last_sequence == -1


def test_parse_header_at_position_and_truncated():
    batch = make_batch()
    assert parse_header(b"xyz" + batch, 3) == parse_header(batch)
    with pytest.raises(CorruptRecordError):
        parse_header(batch[: HEADER_SIZE - 1])


@pytest.mark.parametrize(
    ("sequence", "increment", "expected"),
    [(0, 0, 0), (5, 3, 8), (2**31 - 1, 1, 0), (2**31 - 2, 3, 1), (2**31 - 5, 4, 2**31 - 1)],
)
def test_increment_sequence_wraps_like_kafka(sequence, increment, expected):
    assert increment_sequence(sequence, increment) == expected


def test_iter_batches_splits_without_copying():
    batches = [make_batch(count=n) for n in (1, 2, 5)]
    record_set = bytearray(b"".join(batches))
    parsed = list(iter_batches(record_set))
    assert [bytes(view) for _, view in parsed] == [bytes(b) for b in batches]
    assert [header.records_count for header, _ in parsed] == [1, 2, 5]
    assert all(verify_crc(view, header) for header, view in parsed)
    assert parsed[1][1].obj is record_set  # a view into the caller's buffer
    assert list(iter_batches(b"")) == []


@pytest.mark.parametrize("cut", [1, 11, 12, 16, 17, 60, 61, -1])
def test_truncated_record_set(cut):
    first, second = make_batch(), make_batch(count=2)
    record_set = first + second[:cut]
    with pytest.raises(CorruptRecordError) as info:
        list(iter_batches(record_set))
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    batches, trailing = split_complete_batches(record_set)
    assert [bytes(view) for _, view in batches] == [bytes(first)]
    assert trailing == len(second[:cut])


def test_split_complete_batches_whole_set():
    record_set = make_batch() + make_batch()
    batches, trailing = split_complete_batches(record_set)
    assert len(batches) == 2 and trailing == 0


@pytest.mark.parametrize(
    ("length", "reason"),
    [(-5, "CORRUPT_MESSAGE"), (13, "CORRUPT_MESSAGE"), (48, "CORRUPT_MESSAGE")],
)
def test_bad_batch_length_is_corrupt_in_both_modes(length, reason):
    batch = make_batch()
    struct.pack_into(">i", batch, 8, length)
    for split in (lambda b: list(iter_batches(b)), split_complete_batches):
        with pytest.raises(CorruptRecordError) as info:
            split(batch)
        assert info.value.reason == reason


@pytest.mark.parametrize(
    ("magic", "reason"),
    [
        (0, "UNSUPPORTED_FOR_MESSAGE_FORMAT"),
        (1, "UNSUPPORTED_FOR_MESSAGE_FORMAT"),
        (3, "CORRUPT_MESSAGE"),
        (0xFF, "CORRUPT_MESSAGE"),
    ],
)
def test_wrong_magic(magic, reason):
    batch = make_batch()
    batch[16] = magic
    with pytest.raises(CorruptRecordError) as info:
        list(iter_batches(batch))
    assert info.value.reason == reason


def test_max_batch_size():
    batch = make_batch()
    assert len(list(iter_batches(batch, max_batch_size=len(batch)))) == 1
    with pytest.raises(CorruptRecordError) as info:
        list(iter_batches(batch, max_batch_size=len(batch) - 1))
    assert info.value.error_code == ErrorCode.MESSAGE_TOO_LARGE


def test_offsets_and_leader_epoch_lie_outside_the_crc():
    batch = make_batch()
    crc = parse_header(batch).crc
    patch_base_offset(batch, 123_456_789_012)
    patch_partition_leader_epoch(batch, 17)
    header = parse_header(batch)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (
        123_456_789_012,
        17,
        crc,
    )
    assert verify_crc(batch, header)


def test_patch_on_writable_memoryview_inside_a_record_set():
    record_set = make_batch() + make_batch()
    views = [view for _, view in iter_batches(record_set)]
    patch_base_offset(views[1], 10)
    patch_max_timestamp(views[1], 5, TimestampType.LOG_APPEND_TIME)
    header = parse_header(record_set, len(views[0]))
    assert header.base_offset == 10 and header.max_timestamp == 5
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert verify_crc(views[1])


def test_patch_max_timestamp_recomputes_crc_and_is_idempotent():
    batch = make_batch()
    header = parse_header(batch)
    assert not patch_max_timestamp(batch, header.max_timestamp, TimestampType.CREATE_TIME)
    assert bytes(batch) == bytes(make_batch())
    assert patch_max_timestamp(batch, 99, TimestampType.LOG_APPEND_TIME)
    patched = parse_header(batch)
    assert patched.max_timestamp == 99 and patched.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert patched.crc != header.crc and verify_crc(batch)
    assert patch_max_timestamp(batch, 99, TimestampType.CREATE_TIME)
    assert parse_header(batch).attributes == header.attributes and verify_crc(batch)
    assert patch_max_timestamp(batch, 100)  # type bit untouched when not given
    assert parse_header(batch).timestamp_type == TimestampType.CREATE_TIME


@given(st.data())
def test_any_flipped_byte_under_the_crc_is_detected(data):
    batch = make_batch(compression=data.draw(st.sampled_from(list(CompressionType))))
    position = data.draw(st.integers(21, len(batch) - 1))
    flip = data.draw(st.integers(1, 255))
    batch[position] ^= flip
    assert not verify_crc(batch)


def test_flipped_crc_field_is_detected_and_patch_crc_repairs():
    batch = make_batch()
    batch[18] ^= 0x40
    assert not verify_crc(batch)
    patch_crc(batch)
    assert verify_crc(batch)
