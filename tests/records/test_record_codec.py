"""Records: encode/decode round trips, known bytes, and malformed records."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import Record, decode_record, decode_records_body, encode_record

NULLABLE_BYTES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=20), NULLABLE_BYTES), max_size=5)
RECORDS = st.builds(
    Record,
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**63), 2**63 - 1),
    key=NULLABLE_BYTES,
    value=NULLABLE_BYTES,
    headers=HEADERS,
)


@given(RECORDS)
def test_record_round_trip(record):
    out = bytearray(b"prefix")
    written = encode_record(out, *record)
    assert written == len(out) - 6
    decoded, end = decode_record(bytes(out), 6)
    assert decoded == record and end == len(out)


@given(st.lists(RECORDS, max_size=20))
def test_records_body_round_trip(records):
    body = bytearray()
    for record in records:
        encode_record(body, *record)
    assert decode_records_body(bytes(body), len(records)) == records


def test_known_bytes():
    # length 12, attributes 0, timestampDelta 2 -> 0x04, offsetDelta 1 -> 0x02,
    # key "k" (len 1 -> 0x02), null value (0x01), one header "h" = null
    out = bytearray()
    encode_record(out, 1, 2, b"k", None, [("h", None)])
    assert bytes(out) == bytes(
        [0x14, 0x00, 0x04, 0x02, 0x02, ord("k"), 0x01, 0x02, 0x02, ord("h"), 0x01]
    )
    assert decode_record(bytes(out), 0)[0] == Record(1, 2, b"k", None, [("h", None)])


SAMPLE = Record(0, 0, b"key", b"value", [("h", b"x")])


def encoded(record=SAMPLE) -> bytes:
    out = bytearray()
    encode_record(out, *record)
    return bytes(out)


@pytest.mark.parametrize("cut", range(1, 15))
def test_truncated_record(cut):
    data = encoded()
    with pytest.raises(CorruptRecordError):
        decode_record(data[:-cut], 0)


def test_record_length_too_long_for_its_fields():
    data = bytearray(encoded())
    data[0] += 2  # claims one more byte (zig-zag) than its fields take
    data += b"\x00"
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(data), 0)


def test_field_overrunning_record_length():
    data = bytearray(encoded(Record(0, 0, b"key", None, [])))
    data[4] = 0x7E  # key length 63, beyond the record
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(data) + bytes(100), 0)


def test_invalid_negative_lengths():
    data = bytearray(encoded(Record(0, 0, b"", None, [])))
    data[4] = 0x03  # key length -2
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(data), 0)


def test_non_utf8_header_key():
    out = bytearray()
    encode_record(out, 0, 0, None, None, [(b"\xff\xfe", b"v")])
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode_record(bytes(out), 0)


def test_null_header_key_rejected_on_encode():
    with pytest.raises(ValueError):
        encode_record(bytearray(), 0, 0, None, None, [(None, b"v")])


def test_count_mismatches():
    body = encoded() + encoded()
    assert len(decode_records_body(body, 2)) == 2
    with pytest.raises(CorruptRecordError, match="remain"):
        decode_records_body(body, 1)
    with pytest.raises(CorruptRecordError, match="holds only"):
        decode_records_body(body, 3)
    with pytest.raises(CorruptRecordError):
        decode_records_body(body, -1)
