"""`log.validator`: the produced-batch checks of Kafka's `LogValidator` (header, CRC, records,
keys on compacted topics, timestamps, sizes) and the stored form of a batch. Moved here with
`validate_batch` from tests/records/test_batch_header.py."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from log.log_helpers import make_batch
from onceflow.log.config import LogConfig
from onceflow.log.validator import (
    ACCEPTED,
    check_records_of,
    stored_form,
    validate_batch,
    validate_produced,
)
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import HEADER_SIZE, parse_header, patch_crc
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType


@pytest.mark.parametrize(
    ("magic", "error"),
    [
        (0, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        (1, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
        (3, ErrorCode.CORRUPT_MESSAGE),
        (0xFF, ErrorCode.CORRUPT_MESSAGE),
    ],
)
def test_wrong_magic(magic, error):
    batch = make_batch()
    batch[16] = magic
    assert validate_batch(parse_header(batch), batch) == error


@given(st.data())
def test_any_flipped_byte_under_the_crc_is_corrupt(data):
    batch = make_batch(compression=data.draw(st.sampled_from(list(CompressionType))))
    position = data.draw(st.integers(21, len(batch) - 1))
    batch[position] ^= data.draw(st.integers(1, 255))
    assert validate_batch(parse_header(batch), batch) == ErrorCode.CORRUPT_MESSAGE


def rewrite(batch, offset, fmt, value):
    struct.pack_into(fmt, batch, offset, value)
    patch_crc(batch)
    return parse_header(batch)


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "error"),
    [
        (57, ">i", 0, ErrorCode.INVALID_RECORD),  # empty batch
        (57, ">i", 4, ErrorCode.INVALID_RECORD),  # count != lastOffsetDelta + 1
        (23, ">i", 5, ErrorCode.INVALID_RECORD),
        (23, ">i", -1, ErrorCode.INVALID_RECORD),
        (21, ">h", 0x20, ErrorCode.INVALID_RECORD),  # control batch from a client
        (21, ">h", 0x07, ErrorCode.CORRUPT_MESSAGE),  # unknown codec
        (43, ">q", 1000, ErrorCode.INVALID_RECORD),  # producer id with base sequence -1
        (21, ">h", 0x10, ErrorCode.INVALID_RECORD),  # transactional without producer id
    ],
)
def test_validate_batch_rejections(offset, fmt, value, error):
    batch = make_batch(count=3)
    header = rewrite(batch, offset, fmt, value)
    assert validate_batch(header, batch) == error


def test_validate_batch_accepts_idempotent_and_transactional():
    for kwargs in (
        dict(),
        dict(producer_id=1, producer_epoch=0, base_sequence=0),
        dict(producer_id=1, producer_epoch=0, base_sequence=9, is_transactional=True),
    ):
        batch = make_batch(**kwargs)
        assert validate_batch(parse_header(batch), batch, check_records=True) is None


def test_validate_batch_length_mismatch():
    batch = make_batch()
    header = parse_header(batch)
    assert validate_batch(header, batch + b"\x00") == ErrorCode.CORRUPT_MESSAGE


def test_control_batches_allowed_from_the_coordinator():
    from onceflow.records.control import ControlRecordType, build_control_batch

    batch = build_control_batch(5, 0, ControlRecordType.COMMIT, 1, 0)
    header = parse_header(batch)
    assert validate_batch(header, batch) == ErrorCode.INVALID_RECORD
    assert validate_batch(header, batch, from_client=False, check_records=True) is None


def test_check_records_finds_bad_offset_deltas_and_null_keys():
    from onceflow.records.record import encode_record

    body = bytearray()
    encode_record(body, 0, 0, b"k", b"v")
    encode_record(body, 2, 0, None, b"v")  # skips delta 1
    batch = bytearray(HEADER_SIZE) + body
    struct.pack_into(
        ">qiibIhiqqqhii", batch, 0, 0, len(batch) - 12, -1, 2, 0, 0, 1, 0, 0, -1, -1, -1, 2
    )
    patch_crc(batch)
    header = parse_header(batch)
    assert validate_batch(header, batch) is None  # header-only checks pass
    assert validate_batch(header, batch, check_records=True) == ErrorCode.INVALID_RECORD
    garbage = bytearray(batch)
    garbage[HEADER_SIZE] = 0x7F  # a record length far beyond the batch
    patch_crc(garbage)
    assert (
        validate_batch(parse_header(garbage), garbage, check_records=True)
        == ErrorCode.CORRUPT_MESSAGE
    )


def test_check_records_compacted_requires_keys():
    builder = BatchBuilder()
    builder.append(0, None, b"v")
    batch = builder.build()
    header = parse_header(batch)
    assert validate_batch(header, batch, check_records=True) is None
    assert validate_batch(header, batch, check_records=True, compacted=True) == (
        ErrorCode.INVALID_RECORD
    )


def test_check_records_of_names_every_keyless_record():
    builder = BatchBuilder()
    for key in (b"a", None, b"c", None):
        builder.append(0, key, b"v")
    batch = builder.build()
    assert check_records_of(batch) == (None, [])
    assert check_records_of(batch, compacted=True) == (ErrorCode.INVALID_RECORD, [1, 3])


def test_validate_produced_in_kafkas_order():
    """Size first (no CRC is computed for a batch too large), then header and CRC, then keys
    on a compacted topic (one error per keyless record), then timestamps."""
    batch = make_batch(count=2)
    header = parse_header(batch)
    now = 1_700_000_000_000
    assert validate_produced(header, batch, LogConfig(), "t-0", now) == ACCEPTED
    small = LogConfig(max_message_bytes=len(batch) - 1)
    batch[-1] ^= 1  # a CRC error too: size wins
    assert validate_produced(header, batch, small, "t-0", now).error == ErrorCode.MESSAGE_TOO_LARGE
    rejected = validate_produced(header, batch, LogConfig(), "t-0", now)
    assert rejected == (ErrorCode.CORRUPT_MESSAGE, "record batch rejected: CORRUPT_MESSAGE", ())
    builder = BatchBuilder()
    for key in (b"a", None, None):
        builder.append(now, key, b"v")
    keyless = builder.build()
    compacted = LogConfig(cleanup_policy=("compact",), message_timestamp_difference_max_ms=0)
    rejected = validate_produced(parse_header(keyless), keyless, compacted, "t-0", now + 5)
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    assert rejected.error == ErrorCode.INVALID_RECORD
    assert rejected.record_errors == ((1, message), (2, message))
    assert rejected.message.startswith("One or more records have been rejected due to 2 record")
    late = validate_produced(header, make_batch(count=2), compacted, "t-0", now + 5)
    assert late.error == ErrorCode.INVALID_TIMESTAMP and len(late.record_errors) == 2


def test_stored_form_recompresses_only_when_the_topic_says_so():
    batch = make_batch()
    header = parse_header(batch)
    assert stored_form(header, batch, LogConfig()) == (header, batch)
    assert stored_form(header, batch, LogConfig(compression_type="uncompressed"))[1] is batch
    stored_header, stored = stored_form(header, batch, LogConfig(compression_type="gzip"))
    assert stored_header == parse_header(stored)
    assert stored_header.compression == CompressionType.GZIP
    assert validate_batch(stored_header, stored, check_records=True) is None
