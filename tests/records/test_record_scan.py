"""The key-only record scan (`records.record_scan`) against the full decoder (`records.record`).

On random records (any deltas, null and long keys and values, headers), random whole batches
in every codec and control batches, the scan finds what the decoder finds: each record's
offset delta, timestamp delta, key and whether its value is null, and its exact bytes.
Re-framing a record with another timestamp delta changes only that delta.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType
from onceflow.records.control import ControlRecordType, build_control_batch
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import (
    Record,
    decode_batch_columns,
    decode_columns,
    decode_record,
    encode_record,
)
from onceflow.records.record_scan import reframe_record, scan_batch, scan_records

NULLABLE_BYTES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=10), NULLABLE_BYTES), max_size=3)
RECORDS = st.builds(
    Record,
    offset_delta=st.integers(0, 2**31 - 1) | st.integers(0, 20_000),
    timestamp_delta=st.integers(-(2**63), 2**63 - 1) | st.integers(-20_000, 20_000),
    key=NULLABLE_BYTES,
    value=NULLABLE_BYTES | st.binary(min_size=60, max_size=9000),
    headers=HEADERS,
)


def _assert_scan_matches_decode(scanned, columns) -> None:
    assert scanned.offset_deltas == columns.offset_deltas
    assert scanned.timestamp_deltas == columns.timestamp_deltas
    assert scanned.keys == columns.keys
    assert scanned.tombstones == [value is None for value in columns.values]
    body = scanned.body
    for i, (start, end) in enumerate(zip(scanned.starts, scanned.ends, strict=True)):
        record, after = decode_record(body, start)
        assert after == end
        assert record == Record(*(column[i] for column in columns))


@given(st.lists(RECORDS, max_size=12))
def test_scan_equals_full_decode_on_random_records(records):
    body = bytearray()
    for record in records:
        encode_record(body, *record)
    _assert_scan_matches_decode(
        scan_records(bytes(body), len(records)), decode_columns(body, len(records))
    )


@given(
    st.lists(
        st.tuples(NULLABLE_BYTES, NULLABLE_BYTES, st.integers(0, 10**6)), min_size=1, max_size=150
    ),
    st.sampled_from(list(CompressionType)),
    st.booleans(),
)
def test_scan_equals_full_decode_on_random_batches(pairs, codec, transactional):
    builder = BatchBuilder(
        compression=codec, producer_id=7, producer_epoch=0, is_transactional=transactional
    )
    for key, value, timestamp in pairs:
        builder.append(1_700_000_000_000 + timestamp, key, value, [("h", key)])
    batch = bytes(builder.build())
    _assert_scan_matches_decode(scan_batch(batch), decode_batch_columns(batch))


@pytest.mark.parametrize("kind", list(ControlRecordType))
def test_scan_equals_full_decode_on_control_batches(kind):
    batch = bytes(build_control_batch(5, 3, kind, 9, 1_234))
    scanned = scan_batch(batch)
    _assert_scan_matches_decode(scanned, decode_batch_columns(batch))
    assert scanned.keys[0] is not None and not scanned.tombstones[0]


@given(RECORDS, st.integers(-(2**63), 2**63 - 1) | st.integers(-200, 200))
def test_reframe_changes_only_the_timestamp_delta(record, new_delta):
    body = bytearray()
    encode_record(body, *record)
    scanned = scan_records(bytes(body), 1)
    same = reframe_record(scanned, 0, record.timestamp_delta)
    assert same == bytes(body)
    moved, after = decode_record(reframe_record(scanned, 0, new_delta), 0)
    assert moved == record._replace(timestamp_delta=new_delta)


def test_truncated_and_overlong_bodies_are_corrupt():
    body = bytearray()
    encode_record(body, 0, 0, b"key", b"value")
    encode_record(body, 1, 0, b"key", None)
    for cut in range(1, len(body)):
        with pytest.raises(CorruptRecordError):
            scan_records(bytes(body[:cut]), 2)
    with pytest.raises(CorruptRecordError, match="remain"):
        scan_records(bytes(body), 1)
    with pytest.raises(CorruptRecordError, match="holds only"):
        scan_records(bytes(body), 3)
