"""Kafka primitive types: known encodings, Hypothesis round trips, and bad input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.protocol import codec
from onceflow.protocol.codec import DecodeError, Reader, Writer

INT = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "varint": st.integers(-(2**31), 2**31 - 1),
    "varlong": st.integers(-(2**63), 2**63 - 1),
    "uvarint": st.integers(0, 2**32 - 1),
}


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02")],
)
def test_unsigned_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert codec.encode_uvarint(value) == encoded
    assert codec.read_uvarint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")],
)
def test_zigzag_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert codec.encode_varint(value) == encoded
    assert codec.read_varint(encoded, 0) == (value, len(encoded))
    assert codec.encode_varlong(value) == encoded


def test_varlong_extremes() -> None:
    for value in (-(2**63), 2**63 - 1):
        data = codec.encode_varlong(value)
        assert len(data) == 10
        assert codec.read_varlong(data, 0) == (value, 10)
    with pytest.raises(ValueError):
        codec.encode_varint(2**31)


@pytest.mark.parametrize("kind", sorted(INT))
@given(data=st.data())
def test_integer_round_trip(kind: str, data) -> None:
    value = data.draw(INT[kind])
    encoded = getattr(Writer(), kind)(value).getvalue()
    reader = Reader(encoded)
    assert getattr(reader, kind)() == value
    assert reader.remaining == 0


@given(st.floats(allow_nan=False), st.booleans(), st.uuids())
def test_float_bool_uuid_round_trip(f: float, b: bool, u: uuid.UUID) -> None:
    encoded = Writer().float64(f).boolean(b).uuid(u).getvalue()
    assert len(encoded) == 8 + 1 + 16
    r = Reader(encoded)
    assert (r.float64(), r.boolean(), r.uuid()) == (f, b, u)


STRING_KINDS = ["string", "nullable_string", "compact_string", "compact_nullable_string"]
BYTES_KINDS = ["bytes", "nullable_bytes", "compact_bytes", "compact_nullable_bytes"]


@pytest.mark.parametrize("kind", STRING_KINDS)
@given(value=st.text(max_size=300))
def test_string_round_trip(kind: str, value: str) -> None:
    encoded = getattr(Writer(), kind)(value).getvalue()
    r = Reader(encoded)
    assert getattr(r, kind)() == value
    assert r.remaining == 0


@pytest.mark.parametrize("kind", BYTES_KINDS)
@given(value=st.binary(max_size=300))
def test_bytes_round_trip(kind: str, value: bytes) -> None:
    encoded = getattr(Writer(), kind)(value).getvalue()
    r = Reader(encoded)
    decoded = getattr(r, kind)()
    assert decoded == value and type(decoded) is bytes


@pytest.mark.parametrize("kind", ["nullable_string", "compact_nullable_string"])
def test_nullable_string_null(kind: str) -> None:
    encoded = getattr(Writer(), kind)(None).getvalue()
    assert encoded == (b"\xff\xff" if kind == "nullable_string" else b"\x00")
    assert getattr(Reader(encoded), kind)() is None


@pytest.mark.parametrize(
    ("kind", "null"),
    [("string", b"\xff\xff"), ("compact_string", b"\x00"), ("bytes", b"\xff\xff\xff\xff")],
)
def test_non_nullable_null_rejected(kind: str, null: bytes) -> None:
    with pytest.raises(DecodeError, match="non-nullable"):
        getattr(Reader(null), kind)()


def test_records_are_memoryview_slices() -> None:
    payload = b"\x00\x00\x00\x03abcrest"
    value, end = codec.read_records(memoryview(payload), 0)
    assert isinstance(value, memoryview) and value.obj is payload
    assert (bytes(value), end) == (b"abc", 7)
    out: list = []
    codec.write_compact_records(value, out)
    assert b"".join(out) == b"\x04abc" and out[1] is value
    assert codec.read_compact_records(b"\x00", 0) == (None, 1)


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=50), st.booleans())
def test_array_lengths_and_fixed_items(values: list[int], compact: bool) -> None:
    w = Writer()
    (w.compact_array_length if compact else w.array_length)(len(values))
    w.raw(codec.encode_fixed_items(values, "i"))
    r = Reader(w.getvalue())
    n = r.compact_array_length() if compact else r.array_length()
    items, end = codec.read_fixed_items(r.buf, r.pos, n, "i", 4)
    assert items == values and end == len(w.getvalue())


def test_null_arrays() -> None:
    assert Reader(Writer().array_length(None).getvalue()).array_length() == -1
    assert Reader(Writer().compact_array_length(None).getvalue()).compact_array_length() == -1


def test_array_length_larger_than_input_rejected() -> None:
    with pytest.raises(DecodeError, match="cannot fit"):
        Reader(b"\x00\x00\x10\x00" + b"\x00" * 10).array_length()
    with pytest.raises(DecodeError, match="negative"):
        Reader(b"\xff\xff\xff\xfe").array_length()
    with pytest.raises(DecodeError, match="cannot fit"):
        Reader(codec.encode_uvarint(1000)).compact_array_length()


@given(st.dictionaries(st.integers(0, 2**20), st.binary(max_size=40), max_size=6))
def test_tagged_fields_round_trip(fields: dict[int, bytes]) -> None:
    encoded = Writer().tagged_fields(fields).getvalue()
    r = Reader(encoded)
    assert {k: bytes(v) for k, v in r.tagged_fields().items()} == fields
    assert r.remaining == 0
    assert codec.skip_tagged_fields(encoded, 0) == len(encoded)


def test_uvarint_longer_than_five_bytes_rejected() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff\xff\x01").uvarint()


WRITERS = {
    "int8": 1,
    "int16": 1,
    "uint16": 1,
    "int32": 1,
    "uint32": 1,
    "int64": 1,
    "float64": 1.0,
    "boolean": True,
    "uvarint": 2**30,
    "varint": -(2**30),
    "varlong": 2**60,
    "uuid": uuid.uuid4(),
    "string": "héllo",
    "nullable_string": "x",
    "compact_string": "héllo",
    "compact_nullable_string": "x",
    "bytes": b"abc",
    "nullable_bytes": b"abc",
    "compact_bytes": b"abc",
    "compact_nullable_bytes": b"abc",
    "array_length": 0,
    "compact_array_length": 0,
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_every_truncation_raises_decode_error(kind: str) -> None:
    encoded = getattr(Writer(), kind)(WRITERS[kind]).getvalue()
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            getattr(Reader(encoded[:cut]), kind)()


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\x00\x02\xff\xfe").string()


def test_raw_and_tagged_fields_truncated() -> None:
    with pytest.raises(DecodeError):
        Reader(b"abc").raw(4)
    with pytest.raises(DecodeError):
        Reader(b"\x01\x00\x05ab").tagged_fields()
    with pytest.raises(DecodeError):
        codec.skip_tagged_fields(memoryview(b"\x01\x00\x05ab"), 0)


def test_skip_tagged_fields_on_truncated_input_raises_decode_error():
    from onceflow.protocol.codec import DecodeError, skip_tagged_fields

    for truncated in (b"", b"\x01", b"\x01\x00", b"\x01\x00\x05ab", b"\x81"):
        with pytest.raises(DecodeError):
            skip_tagged_fields(truncated, 0)
    assert skip_tagged_fields(b"\x01\x00\x02ab", 0) == 5
