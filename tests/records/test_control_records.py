"""COMMIT/ABORT control batches: layout, parsing, malformed control records."""

import struct

import pytest

from onceflow.records.batch import HEADER_SIZE, parse_header, patch_crc, verify_crc
from onceflow.records.builder import BatchBuilder
from onceflow.records.control import (
    ControlRecord,
    ControlRecordType,
    build_control_batch,
    encode_control_key,
    encode_marker_value,
    parse_control_record,
)
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import decode_records


@pytest.mark.parametrize("control_type", list(ControlRecordType))
def test_build_control_batch(control_type):
    batch = build_control_batch(
        producer_id=1234,
        producer_epoch=7,
        control_type=control_type,
        coordinator_epoch=9,
        timestamp_ms=1_700_000_000_123,
        partition_leader_epoch=3,
    )
    header = parse_header(batch)
    assert header.is_control and header.is_transactional
    assert header.attributes == 0x30  # uncompressed, CreateTime
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 7, -1)
    assert header.records_count == 1 and header.last_offset_delta == 0
    assert header.base_timestamp == header.max_timestamp == 1_700_000_000_123
    assert header.partition_leader_epoch == 3 and header.base_offset == 0
    assert verify_crc(batch)
    (record,) = decode_records(batch)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 9)
    assert record.headers == []
    assert parse_control_record(batch) == ControlRecord(0, control_type, 9)


def control_batch_with(key, value, count=1):
    builder = BatchBuilder(producer_id=1, producer_epoch=0, is_transactional=True, is_control=True)
    for _ in range(count):
        builder.append(0, key, value)
    return builder.build()


def test_newer_versions_are_read_as_version_zero():
    batch = control_batch_with(
        struct.pack(">hh", 1, 0) + b"extra", struct.pack(">hi", 2, 5) + b"more"
    )
    assert parse_control_record(batch) == ControlRecord(1, ControlRecordType.ABORT, 5)


def test_non_marker_control_type_is_returned_raw():
    batch = control_batch_with(struct.pack(">hh", 0, 2), b"leader change payload")
    assert parse_control_record(batch) == ControlRecord(0, 2, None)


@pytest.mark.parametrize(
    ("key", "value", "count"),
    [
        (None, encode_marker_value(1), 1),
        (b"\x00\x00\x00", encode_marker_value(1), 1),
        (struct.pack(">hh", -1, 1), encode_marker_value(1), 1),
        (encode_control_key(ControlRecordType.COMMIT), None, 1),
        (encode_control_key(ControlRecordType.COMMIT), b"\x00\x00\x00\x01", 1),
        (encode_control_key(ControlRecordType.COMMIT), struct.pack(">hi", -3, 1), 1),
        (encode_control_key(ControlRecordType.COMMIT), encode_marker_value(1), 2),
    ],
)
def test_malformed_control_records(key, value, count):
    with pytest.raises(CorruptRecordError):
        parse_control_record(control_batch_with(key, value, count))


def test_data_batch_is_not_a_control_record():
    builder = BatchBuilder()
    builder.append(0, encode_control_key(ControlRecordType.COMMIT), encode_marker_value(0))
    with pytest.raises(CorruptRecordError, match="not a control batch"):
        parse_control_record(builder.build())


def test_corrupt_control_record_body():
    batch = build_control_batch(1, 0, ControlRecordType.ABORT, 0, 0)
    batch[HEADER_SIZE] = 0x7F
    patch_crc(batch)
    with pytest.raises(CorruptRecordError):
        parse_control_record(batch)
