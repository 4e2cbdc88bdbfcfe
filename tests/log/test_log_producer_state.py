"""ProducerStateManager rules, table-driven over (producer state, batch, origin), plus the
transaction hooks, LSO bookkeeping and expiration."""

from __future__ import annotations

import pytest

from onceflow.log.producer_state import (
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    DuplicateBatch,
    ProducerStateEntry,
    ProducerStateManager,
    in_sequence,
)
from onceflow.protocol.errors import ErrorCode

PID = 42
MAX_SEQ = 2**31 - 1
CLIENT = AppendOrigin.CLIENT
COORDINATOR = AppendOrigin.COORDINATOR
REPLICATION = AppendOrigin.REPLICATION
OK = ErrorCode.NONE
OUT_OF_ORDER = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
BAD_EPOCH = ErrorCode.INVALID_PRODUCER_EPOCH


def _apply(manager, epoch, first, last, first_offset, *, txn=False, origin=CLIENT, ts=1000):
    """Stage and (on success) commit one data batch; returns the error."""
    info = manager.prepare_update(PID, origin)
    error = info.append_data_batch(
        epoch, first, last, first_offset, first_offset + (last - first), ts, txn
    )
    if error == ErrorCode.NONE:
        manager.update(info)
    return error


# -- states the table starts from ----------------------------------------------------------------


def unknown():
    return ProducerStateManager()


def known():
    """Epoch 1, batches seq 0-4 at offsets 0-4 and 5-9 at offsets 5-9."""
    m = ProducerStateManager()
    assert _apply(m, 1, 0, 4, 0) == ErrorCode.NONE
    assert _apply(m, 1, 5, 9, 5) == ErrorCode.NONE
    return m


def known_at_max_sequence():
    """Epoch 1, last sequence 2**31-1."""
    m = ProducerStateManager()
    assert _apply(m, 1, MAX_SEQ - 2, MAX_SEQ, 0) == ErrorCode.NONE
    return m


def seven_batches():
    """Epoch 1, seven single-record batches seq 0..6 (0 and 1 fell out of the window)."""
    m = ProducerStateManager()
    for seq in range(7):
        assert _apply(m, 1, seq, seq, seq) == ErrorCode.NONE
    return m


def open_txn():
    """Epoch 1, a transaction open since offset 0 (seq 0-1), coordinator epoch 3."""
    m = ProducerStateManager()
    info = m.prepare_update(PID, COORDINATOR)
    assert info.append_end_txn_marker(1, True, 3, 0, 500) == ErrorCode.NONE  # sets coord epoch
    m.update(info)
    assert _apply(m, 1, 0, 1, 10, txn=True) == ErrorCode.NONE
    return m


def after_marker():
    """Epoch 2 set by a marker: a known epoch with an empty window."""
    m = known()
    info = m.prepare_update(PID, COORDINATOR)
    assert info.append_end_txn_marker(2, False, 0, 20, 500) == ErrorCode.NONE
    m.update(info)
    return m


# (name, state, origin, (epoch, first_seq, last_seq, first_offset, transactional), expected)
DATA_CASES = [
    ("unknown producer, seq 0", unknown, CLIENT, (0, 0, 4, 0, False), OK),
    ("unknown producer, seq != 0 (KIP-360)", unknown, CLIENT, (0, 7, 9, 0, False), OK),
    ("unknown producer, any epoch", unknown, CLIENT, (5, 3, 3, 0, False), OK),
    ("in sequence", known, CLIENT, (1, 10, 12, 10, False), OK),
    ("lower epoch", known, CLIENT, (0, 10, 10, 10, False), BAD_EPOCH),
    ("lower epoch, seq 0", known, CLIENT, (0, 0, 0, 10, False), BAD_EPOCH),
    ("gap", known, CLIENT, (1, 11, 12, 10, False), OUT_OF_ORDER),
    ("overlap, not exact", known, CLIENT, (1, 8, 10, 10, False), OUT_OF_ORDER),
    ("seq 0 again, same epoch", known, CLIENT, (1, 0, 0, 10, False), OUT_OF_ORDER),
    ("new epoch from seq 0", known, CLIENT, (2, 0, 3, 10, False), OK),
    ("new epoch, seq != 0", known, CLIENT, (2, 10, 10, 10, False), OUT_OF_ORDER),
    ("wrap to 0 after 2**31-1", known_at_max_sequence, CLIENT, (1, 0, 2, 3, False), OK),
    ("no wrap to 1", known_at_max_sequence, CLIENT, (1, 1, 2, 3, False), OUT_OF_ORDER),
    ("retry older than the window", seven_batches, CLIENT, (1, 0, 0, 7, False), OUT_OF_ORDER),
    (
        "retry of batch 2 (oldest retained) as a new batch",
        seven_batches,
        CLIENT,
        (1, 2, 2, 7, False),
        OUT_OF_ORDER,
    ),
    ("same epoch, empty window, seq 0", after_marker, CLIENT, (2, 0, 0, 21, False), OK),
    ("same epoch, empty window, seq 5", after_marker, CLIENT, (2, 5, 5, 21, False), OUT_OF_ORDER),
    ("coordinator: no sequence check", known, COORDINATOR, (1, 50, 50, 10, False), OK),
    ("coordinator: lower epoch", known, COORDINATOR, (0, 10, 10, 10, False), BAD_EPOCH),
    ("replication: no checks", known, REPLICATION, (0, 50, 50, 10, False), OK),
    ("open txn, transactional batch", open_txn, CLIENT, (1, 2, 2, 12, True), OK),
    (
        "open txn, non-transactional batch",
        open_txn,
        CLIENT,
        (1, 2, 2, 12, False),
        ErrorCode.INVALID_TXN_STATE,
    ),
    ("open txn, lower epoch", open_txn, CLIENT, (0, 2, 2, 12, True), BAD_EPOCH),
    ("open txn, gap beats txn state", open_txn, CLIENT, (1, 5, 5, 12, False), OUT_OF_ORDER),
]


@pytest.mark.parametrize(
    ("state", "origin", "batch", "expected"),
    [case[1:] for case in DATA_CASES],
    ids=[case[0] for case in DATA_CASES],
)
def test_data_batch_rules(state, origin, batch, expected):
    manager = state()
    before = {pid: entry.copy() for pid, entry in manager.producers.items()}
    epoch, first, last, first_offset, txn = batch
    info = manager.prepare_update(PID, origin)
    error = info.append_data_batch(
        epoch, first, last, first_offset, first_offset + last - first, 1_500, txn
    )
    assert error == expected
    # staging never touches the manager, whatever the outcome
    assert manager.producers == before
    if error == OK:
        manager.update(info)
        entry = manager.last_entry(PID)
        assert entry.producer_epoch == epoch
        assert entry.last_seq == last
        assert entry.last_data_offset == first_offset + last - first
        assert entry.last_timestamp == 1_500


# (name, state, origin, (epoch, is_abort, coordinator_epoch), expected error, expected completed)
MARKER_CASES = [
    (
        "commit ends open txn",
        open_txn,
        COORDINATOR,
        (1, False, 3),
        OK,
        CompletedTxn(PID, 10, 30, False),
    ),
    (
        "abort ends open txn",
        open_txn,
        COORDINATOR,
        (1, True, 3),
        OK,
        CompletedTxn(PID, 10, 30, True),
    ),
    (
        "bumped epoch marker aborts",
        open_txn,
        COORDINATOR,
        (2, True, 4),
        OK,
        CompletedTxn(PID, 10, 30, True),
    ),
    ("marker without open txn", known, COORDINATOR, (1, False, 0), OK, None),
    ("marker for unknown producer", unknown, COORDINATOR, (0, True, 0), OK, None),
    ("lower producer epoch", open_txn, COORDINATOR, (0, True, 3), BAD_EPOCH, None),
    (
        "stale coordinator epoch",
        open_txn,
        COORDINATOR,
        (1, True, 2),
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        None,
    ),
    ("marker from a client", open_txn, CLIENT, (1, False, 3), ErrorCode.INVALID_RECORD, None),
    (
        "replication: stale coordinator accepted",
        open_txn,
        REPLICATION,
        (1, True, 0),
        OK,
        CompletedTxn(PID, 10, 30, True),
    ),
]


@pytest.mark.parametrize(
    ("state", "origin", "marker", "expected", "completed"),
    [case[1:] for case in MARKER_CASES],
    ids=[case[0] for case in MARKER_CASES],
)
def test_marker_rules(state, origin, marker, expected, completed):
    manager = state()
    before = {pid: entry.copy() for pid, entry in manager.producers.items()}
    epoch, is_abort, coordinator_epoch = marker
    info = manager.prepare_update(PID, origin)
    assert info.append_end_txn_marker(epoch, is_abort, coordinator_epoch, 30, 3_000) == expected
    assert manager.producers == before
    if expected != OK:
        return
    assert info.completed_txns == ([completed] if completed else [])
    manager.update(info)
    entry = manager.last_entry(PID)
    assert entry.current_txn_first_offset is None
    assert entry.coordinator_epoch == coordinator_epoch
    assert entry.producer_epoch == epoch
    assert manager.first_unstable_offset is None
    if before.get(PID) is not None and before[PID].producer_epoch != epoch:
        assert not entry.batches  # a new epoch clears the window


def test_duplicate_of_each_retained_batch_is_found_with_its_original_offsets():
    manager = seven_batches()
    for seq in range(2, 7):
        assert manager.find_duplicate(PID, 1, seq, seq) == DuplicateBatch(seq, seq, 1000)
    assert manager.find_duplicate(PID, 1, 1, 1) is None  # fell out of the window
    assert manager.find_duplicate(PID, 0, 5, 5) is None  # another epoch
    assert manager.find_duplicate(PID, 1, 5, 6) is None  # not exact
    assert manager.find_duplicate(PID + 1, 1, 5, 5) is None


def test_batches_of_one_record_set_are_checked_against_the_staged_state():
    manager = known()
    info = manager.prepare_update(PID, CLIENT)
    assert info.append_data_batch(1, 10, 12, 10, 12, 1000, False) == OK
    assert info.append_data_batch(1, 13, 14, 13, 14, 1000, False) == OK
    assert info.append_data_batch(1, 13, 14, 15, 16, 1000, False) == OUT_OF_ORDER
    other = manager.prepare_update(PID, CLIENT)
    assert other.append_data_batch(1, 10, 10, 10, 10, 1000, False) == OK
    # unknown producer: only the first batch may start anywhere
    fresh = ProducerStateManager().prepare_update(PID, CLIENT)
    assert fresh.append_data_batch(0, 100, 100, 0, 0, 1000, False) == OK
    assert fresh.append_data_batch(0, 105, 105, 1, 1, 1000, False) == OUT_OF_ORDER


def test_window_keeps_the_last_five_batches():
    manager = seven_batches()
    entry = manager.last_entry(PID)
    assert [b.first_seq for b in entry.batches] == [2, 3, 4, 5, 6]
    assert entry.batches[0] == BatchMetadata(2, 2, 2, 0, 1000)


def test_in_sequence():
    assert in_sequence(4, 5) and in_sequence(-1, 0) and in_sequence(MAX_SEQ, 0)
    assert not in_sequence(4, 6) and not in_sequence(4, 4) and not in_sequence(MAX_SEQ, 1)


def test_transactional_batch_opens_txn_and_first_unstable_offset_is_the_minimum():
    manager = ProducerStateManager()
    assert manager.first_unstable_offset is None
    for pid, offset in ((1, 30), (2, 10), (3, 20)):
        info = manager.prepare_update(pid, CLIENT)
        assert info.append_data_batch(0, 0, 0, offset, offset, 1000, True) == OK
        manager.update(info)
    # a later batch of an open txn does not move its first offset
    info = manager.prepare_update(2, CLIENT)
    assert info.append_data_batch(0, 1, 1, 40, 40, 1000, True) == OK
    manager.update(info)
    assert manager.first_unstable_offset == 10
    info = manager.prepare_update(2, COORDINATOR)
    assert info.append_end_txn_marker(0, True, 0, 41, 1000) == OK
    manager.update(info)
    assert info.completed_txns == [CompletedTxn(2, 10, 41, True)]
    assert manager.last_stable_offset_after(info.completed_txns[0]) == 20
    assert manager.first_unstable_offset == 20


def test_last_stable_offset_after_the_only_txn_is_the_offset_after_its_marker():
    manager = open_txn()
    info = manager.prepare_update(PID, COORDINATOR)
    info.append_end_txn_marker(1, True, 3, 30, 1000)
    manager.update(info)
    assert manager.last_stable_offset_after(info.completed_txns[0]) == 31


def test_remove_expired_keeps_producers_with_an_open_txn():
    manager = ProducerStateManager(producer_id_expiration_ms=1_000)
    for pid, ts, txn in ((1, 1_000, False), (2, 1_500, False), (3, 1_000, True)):
        info = manager.prepare_update(pid, CLIENT)
        info.append_data_batch(0, 0, 0, pid, pid, ts, txn)
        manager.update(info)
    assert manager.remove_expired(1_999) == 0  # pid 1 idle 999 ms
    assert manager.remove_expired(2_000) == 1  # pid 1 idle 1000 ms; pid 3 idle too, but open
    assert sorted(manager.producers) == [2, 3]
    assert manager.remove_expired(10_000) == 1
    assert sorted(manager.producers) == [3]


def test_remove_expired_boundary():
    manager = ProducerStateManager(producer_id_expiration_ms=1_000)
    info = manager.prepare_update(1, CLIENT)
    info.append_data_batch(0, 0, 0, 0, 0, 5_000, False)
    manager.update(info)
    assert manager.remove_expired(5_999) == 0
    assert manager.remove_expired(6_000) == 1
    assert len(manager) == 0


def test_active_producers_rows():
    manager = open_txn()
    row = manager.active_producers()[0]
    assert row == (PID, 1, 1, 1000, 3, 10)
    assert known().active_producers()[0].current_txn_start_offset == -1


def test_entry_copy_is_independent():
    entry = ProducerStateEntry(PID, 1, batches=[BatchMetadata(0, 0, 0, 0, 1)])
    copy = entry.copy()
    copy.add_batch(1, 1, 1, 1, 0, 2)
    assert len(entry.batches) == 1 and len(copy.batches) == 2
