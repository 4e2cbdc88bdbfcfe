"""TransactionIndex: Kafka's 34-byte layout, load/cut of damaged files, collect, truncate."""

from __future__ import annotations

import os
import struct

import pytest

from onceflow.log.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex


def test_entries_round_trip_in_kafkas_layout(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    index = TransactionIndex(path)
    entries = [AbortedTxn(7, 0, 5, 3), AbortedTxn(2**40, 3, 9, 10)]
    for entry in entries:
        index.append(entry)
    index.flush()
    index.close()
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 2 * ENTRY_SIZE == 68
    assert struct.unpack(">hqqqq", data[:34]) == (0, 7, 0, 5, 3)
    loaded = TransactionIndex(path)
    assert loaded.load() is None
    assert loaded.entries == entries


def test_append_out_of_order_is_a_bug(tmp_path):
    index = TransactionIndex(str(tmp_path / "x.txnindex"))
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(1, 0, 5, 6))
    index.close()


@pytest.mark.parametrize(
    ("tail", "kept"),
    [
        (b"\x00" * 10, 2),
        (struct.pack(">hqqqq", 1, 1, 20, 21, 22), 2),
        (struct.pack(">hqqqq", 0, 1, 2, 3, 4), 2),
    ],
    ids=["torn", "bad version", "out of order"],
)
def test_load_cuts_a_damaged_tail(tmp_path, tail, kept):
    path = str(tmp_path / "x.txnindex")
    index = TransactionIndex(path)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 6, 9, 10))
    index.close()
    with open(path, "ab") as f:
        f.write(tail)
    loaded = TransactionIndex(path)
    assert loaded.load() is not None
    assert len(loaded.entries) == kept
    assert os.path.getsize(path) == kept * ENTRY_SIZE


def test_collect_overlap_and_completion():
    index = TransactionIndex("/nonexistent/never-written.txnindex")
    index.entries = [AbortedTxn(1, 0, 5, 2), AbortedTxn(2, 2, 8, 9), AbortedTxn(3, 10, 12, 13)]
    assert index.collect(0, 3) == ([AbortedTxn(1, 0, 5, 2), AbortedTxn(2, 2, 8, 9)], True)
    assert index.collect(6, 11) == ([AbortedTxn(2, 2, 8, 9), AbortedTxn(3, 10, 12, 13)], True)
    assert index.collect(13, 20) == ([], False)


def test_truncate_to_and_reset(tmp_path):
    path = str(tmp_path / "x.txnindex")
    index = TransactionIndex(path)
    for i in range(3):
        index.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    index.truncate_to(16)
    assert [e.producer_id for e in index.entries] == [0, 1]
    assert os.path.getsize(path) == 2 * ENTRY_SIZE
    index.append(AbortedTxn(9, 16, 17, 18))  # appends continue after the cut
    assert os.path.getsize(path) == 3 * ENTRY_SIZE
    index.reset()
    assert index.entries == [] and os.path.getsize(path) == 0
    index.close()
