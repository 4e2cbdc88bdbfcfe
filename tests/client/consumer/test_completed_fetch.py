"""CompletedFetch: positions, control batches, read_committed filtering of aborted data."""

from __future__ import annotations

import pytest

from onceflow.client.consumer.completed_fetch import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    CompletedFetch,
)
from onceflow.records.batch import TimestampType, patch_base_offset
from onceflow.records.builder import BatchBuilder
from onceflow.records.control import ControlRecordType, build_control_batch
from onceflow.records.errors import CorruptRecordError


class Log:
    """Builds a record set batch by batch, assigning offsets like the broker."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.next_offset = 0

    def add(self, values, producer_id=-1, transactional=False) -> int:
        builder = BatchBuilder(
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=0 if producer_id >= 0 else -1,
            is_transactional=transactional,
        )
        for value in values:
            builder.append(1000, None, value)
        return self._append(builder.build())

    def marker(self, producer_id: int, kind: ControlRecordType) -> int:
        return self._append(build_control_batch(producer_id, 0, kind, 0, 1000))

    def _append(self, batch: bytearray) -> int:
        first = self.next_offset
        patch_base_offset(batch, first)
        self.data += batch
        self.next_offset += _records(batch)
        return first


def _records(batch: bytearray) -> int:
    return int.from_bytes(batch[57:61], "big")


def values(fetch: CompletedFetch, limit: int = 1000) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in fetch.take(limit)]


def test_plain_records_and_position() -> None:
    log = Log()
    log.add([b"a", b"b"])
    log.add([b"c"])
    fetch = CompletedFetch("t", 0, 0, bytes(log.data))
    assert values(fetch, 2) == [(0, b"a"), (1, b"b")]
    assert fetch.next_offset == 2 and not fetch.exhausted
    assert values(fetch) == [(2, b"c")]
    assert fetch.exhausted and fetch.next_offset == 3 and fetch.last_fetched_offset == 3


def test_records_before_the_fetch_offset_are_skipped() -> None:
    log = Log()
    log.add([b"a", b"b", b"c"])
    fetch = CompletedFetch("t", 0, 1, bytes(log.data))
    assert values(fetch) == [(1, b"b"), (2, b"c")]


def test_truncated_last_batch_is_ignored() -> None:
    log = Log()
    log.add([b"a"])
    log.add([b"b"])
    fetch = CompletedFetch("t", 0, 0, bytes(log.data[:-5]))
    assert values(fetch) == [(0, b"a")]
    assert fetch.last_fetched_offset == 1


def test_crc_mismatch_raises() -> None:
    log = Log()
    log.add([b"abc"])
    data = bytearray(log.data)
    data[-2] ^= 0x20  # a byte of the value: "c" -> "C"
    with pytest.raises(CorruptRecordError, match="CRC"):
        CompletedFetch("t", 0, 0, bytes(data)).take(10)
    assert values(CompletedFetch("t", 0, 0, bytes(data), check_crcs=False)) == [(0, b"abC")]


def _transactions() -> tuple[bytes, list[tuple[int, int]]]:
    """pid 1 commits [t1a], pid 2 aborts [t2a, t2b] interleaved, plain records around."""
    log = Log()
    log.add([b"plain0"])
    log.add([b"t1a"], producer_id=1, transactional=True)
    first_abort = log.add([b"t2a"], producer_id=2, transactional=True)
    log.add([b"t2b"], producer_id=2, transactional=True)
    log.marker(1, ControlRecordType.COMMIT)
    log.marker(2, ControlRecordType.ABORT)
    log.add([b"t2c"], producer_id=2, transactional=True)  # pid 2's next transaction
    log.marker(2, ControlRecordType.COMMIT)
    log.add([b"plain1"])
    return bytes(log.data), [(2, first_abort)]


@pytest.mark.parametrize(
    ("isolation", "expected"),
    [
        (READ_UNCOMMITTED, [b"plain0", b"t1a", b"t2a", b"t2b", b"t2c", b"plain1"]),
        (READ_COMMITTED, [b"plain0", b"t1a", b"t2c", b"plain1"]),
    ],
)
def test_isolation_levels(isolation: int, expected: list[bytes]) -> None:
    data, aborted = _transactions()
    fetch = CompletedFetch("t", 0, 0, data, isolation_level=isolation, aborted_transactions=aborted)
    got = fetch.take(100)
    assert [r.value for r in got] == expected
    assert fetch.next_offset == 9  # past the last batch, markers included


def test_read_committed_one_at_a_time_keeps_state() -> None:
    data, aborted = _transactions()
    fetch = CompletedFetch(
        "t", 0, 0, data, isolation_level=READ_COMMITTED, aborted_transactions=aborted
    )
    got = []
    while not fetch.exhausted:
        got += [r.value for r in fetch.take(1)]
    assert got == [b"plain0", b"t1a", b"t2c", b"plain1"]


def test_control_batches_only_move_the_position() -> None:
    log = Log()
    log.marker(5, ControlRecordType.COMMIT)
    fetch = CompletedFetch("t", 0, 0, bytes(log.data))
    assert fetch.take(10) == []
    assert fetch.exhausted and fetch.next_offset == 1


def test_empty_and_none_records() -> None:
    for records in (None, b""):
        fetch = CompletedFetch("t", 0, 7, records)
        assert fetch.take(10) == [] and fetch.exhausted and fetch.last_fetched_offset == 7


def _rows_of(chunk) -> list[tuple]:
    """FetchedColumns -> (offset, timestamp, timestamp type, key, value, headers) rows."""
    names = ("offsets", "timestamps", "timestamp_types", "keys", "values", "headers")
    return list(zip(*(getattr(chunk, name) for name in names), strict=True))


def _rows(records) -> list[tuple]:
    return [(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers) for r in records]


def _mixed_log() -> tuple[bytes, list[tuple[int, int]]]:
    """Transactions, keys, headers, log-append time and a compressed batch in one record set."""
    data, aborted = _transactions()
    log = Log()
    log.data, log.next_offset = bytearray(data), 9
    for kwargs in ({"timestamp_type": TimestampType.LOG_APPEND_TIME}, {"compression": 1}, {}):
        builder = BatchBuilder(**kwargs)
        for i in range(5):
            builder.append(2000 + i, b"k%d" % i, b"v" * (i * 40), [("h", b"x")] if i else [])
        log._append(builder.build())
    return bytes(log.data), aborted


@pytest.mark.parametrize("isolation", [READ_UNCOMMITTED, READ_COMMITTED])
@pytest.mark.parametrize("fetch_offset", [0, 3, 11, 16])
@pytest.mark.parametrize("limit", [1, 4, 1000])
def test_take_columns_hands_out_what_take_does(isolation, fetch_offset, limit) -> None:
    data, aborted = _mixed_log()

    def fetch() -> CompletedFetch:
        return CompletedFetch(
            "t", 3, fetch_offset, data, isolation_level=isolation, aborted_transactions=aborted
        )

    by_rows, by_columns = fetch(), fetch()
    expected = _rows(by_rows.take(1000))
    got, positions = [], []
    while not by_columns.exhausted:
        chunk = by_columns.take_columns(limit)
        assert (chunk.topic, chunk.partition) == ("t", 3)
        assert len(chunk.offsets) < limit + 5  # whole batches: at most one batch more
        got += _rows_of(chunk)
        positions.append(by_columns.next_offset)
    assert got == expected and len(expected) >= 8
    assert positions == sorted(positions) and by_columns.next_offset == by_rows.next_offset


def test_take_columns_after_a_partial_take_continues_at_the_position() -> None:
    data, aborted = _mixed_log()
    rows = CompletedFetch("t", 0, 0, data).take(1000)
    fetch = CompletedFetch("t", 0, 0, data)
    head = fetch.take(12)  # stops inside the log-append-time batch
    rest = fetch.take_columns(1000)
    assert _rows(head) + _rows_of(rest) == _rows(rows)
