"""Zig-zag varint/varlong codec: round trips, Kafka's wire bytes, malformed input."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record import util as kafka_util

from onceflow.records.errors import CorruptRecordError
from onceflow.records.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    size_of_varint,
    size_of_varlong,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@given(INT32)
def test_varint_round_trip(value):
    out = bytearray(b"\xaa")
    encode_varint(out, value)
    assert len(out) - 1 == size_of_varint(value) <= 5
    assert decode_varint(bytes(out), 1) == (value, len(out))


@given(INT64)
def test_varlong_round_trip(value):
    out = bytearray()
    encode_varlong(out, value)
    assert len(out) == size_of_varlong(value) <= 10
    assert decode_varlong(memoryview(out), 0) == (value, len(out))


@given(INT32)
def test_varint_matches_kafka_python(value):
    # kafka-python's encoder is an independent implementation of the same zig-zag format
    expected = bytearray()
    kafka_util.encode_varint(value, expected.append)
    out = bytearray()
    encode_varint(out, value)
    assert out == expected
    assert kafka_util.decode_varint(bytes(out), 0)[0] == value


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_known_bytes(value, wire):
    out = bytearray()
    encode_varint(out, value)
    assert bytes(out) == wire


def test_varlong_extremes():
    out = bytearray()
    encode_varlong(out, -(2**63))
    assert bytes(out) == b"\xff" * 9 + b"\x01"


@pytest.mark.parametrize("wire", [b"", b"\x80", b"\xff\xff"])
def test_truncated_varint_raises(wire):
    with pytest.raises(CorruptRecordError):
        decode_varint(wire, 0)
    with pytest.raises(CorruptRecordError):
        decode_varlong(wire, 0)


def test_overlong_varint_raises():
    with pytest.raises(CorruptRecordError, match="longer than 5"):
        decode_varint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(CorruptRecordError, match="longer than 10"):
        decode_varlong(b"\x80" * 10 + b"\x01", 0)


def test_varint_above_int32_raises():
    out = bytearray()
    encode_varlong(out, 2**31)
    with pytest.raises(CorruptRecordError):
        decode_varint(bytes(out), 0)


def test_encode_out_of_range_is_a_bug():
    with pytest.raises(ValueError):
        encode_varint(bytearray(), 2**31)
    with pytest.raises(ValueError):
        encode_varlong(bytearray(), 2**63)
