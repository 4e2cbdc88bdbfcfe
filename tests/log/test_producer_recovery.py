"""Producer state across restarts: snapshots on roll and close, corrupt or missing snapshots,
torn tails, truncation, damaged `.txnindex` files, and the log manager's shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import time

import pytest

from log.log_helpers import make_batch, open_log
from log.producer_helpers import marker, producer_batch
from onceflow.log.config import LogConfig
from onceflow.log.manager import LogManager
from onceflow.log.producer_snapshot import (
    CorruptSnapshotError,
    decode_snapshot,
    encode_snapshot,
    list_snapshot_offsets,
    snapshot_path,
)
from onceflow.log.producer_state import AppendOrigin, BatchMetadata, ProducerStateEntry
from onceflow.protocol.errors import ErrorCode

COORDINATOR = AppendOrigin.COORDINATOR
SMALL = LogConfig(segment_bytes=600)  # a roll every few batches
NOW = int(time.time() * 1000)  # batch timestamps: recent, so nothing expires on load


def state_of(log):
    """Everything recovery must rebuild: producer entries, open txns, aborted-txn entries."""
    return (
        {pid: entry.copy() for pid, entry in log.producer_state.producers.items()},
        log.producer_state.first_unstable_offset,
        [(s.base_offset, list(s.txn_index.entries)) for s in log.segments if s.txn_index.entries],
    )


def workload(log):
    """Idempotent and transactional appends with commits and aborts; yields after each append
    the log end offset (the record set's own end) so callers can record states."""
    seqs: dict[int, int] = {}

    def data(pid, count, txn=False, epoch=0):
        seq = seqs.get(pid, 0)
        seqs[pid] = seq + count
        result = log.append(producer_batch(pid, epoch, seq, count, txn=txn, timestamp=NOW))
        assert result.error == ErrorCode.NONE, result

    def end(pid, abort, epoch=0):
        batch = marker(pid, epoch, abort=abort, coordinator_epoch=1, timestamp=NOW)
        result = log.append(batch, origin=COORDINATOR)
        assert result.error == ErrorCode.NONE, result

    for round_ in range(6):
        data(1, 2)
        yield
        data(2, 1, txn=True)
        yield
        data(3, 1, txn=True)
        yield
        log.append(make_batch(1))
        yield
        end(2, abort=round_ % 2 == 0)
        yield
        data(1, 1)
        yield
        end(3, abort=True)
        yield
    data(2, 1, txn=True)  # left open
    yield


def run_workload(log):
    """Run the whole workload; returns {log end offset: state after the append ending there}."""
    states = {log.log_end_offset: state_of(log)}
    for _ in workload(log):
        states[log.log_end_offset] = state_of(log)
    return states


# -- snapshot codec ------------------------------------------------------------------------------


def _entries():
    return [
        ProducerStateEntry(1, 0, -1, 5, None, [BatchMetadata(0, 4, 4, 4, 5)]),
        ProducerStateEntry(
            2**40, 7, 3, 9, 12, [BatchMetadata(s, s, 10 + s, 0, 9) for s in range(5)]
        ),
        ProducerStateEntry(3, 2, 1, 0, None, []),
    ]


def test_snapshot_codec_round_trip():
    offset, entries = decode_snapshot(encode_snapshot(77, _entries()))
    assert offset == 77 and entries == _entries()


@pytest.mark.parametrize("damage", ["flip", "truncate", "append", "version", "empty"])
def test_snapshot_codec_detects_damage(damage):
    data = bytearray(encode_snapshot(77, _entries()))
    if damage == "flip":
        data[30] ^= 0x01
    elif damage == "truncate":
        data = data[:-3]
    elif damage == "append":
        data += b"\0"
    elif damage == "version":
        data[1] = 9
    else:
        data = bytearray()
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))


# -- restarts ------------------------------------------------------------------------------------


def test_clean_restart_restores_state_from_the_shutdown_snapshot(tmp_path):
    log = open_log(tmp_path, SMALL)
    states = run_workload(log)
    end = log.log_end_offset
    log.close()
    assert end in list_snapshot_offsets(log.dir_path)
    assert len(list_snapshot_offsets(log.dir_path)) <= 3  # old ones pruned
    reopened = open_log(tmp_path, SMALL, clean_shutdown=True)
    assert state_of(reopened) == states[end]
    assert reopened.last_stable_offset == reopened.producer_state.first_unstable_offset
    # the whole window survived: producer 1's batches are (3r, 3r+1) and (3r+2) per round, so
    # the window holds (11), (12, 13), (14), (15, 16), (17)
    for seq, count in ((17, 1), (11, 1)):
        assert reopened.append(producer_batch(1, 0, seq, count, timestamp=NOW)).duplicate
    outside = reopened.append(producer_batch(1, 0, 9, 2, timestamp=NOW))
    assert outside.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    reopened.close()


def test_roll_takes_snapshots_at_segment_bases(tmp_path):
    log = open_log(tmp_path, SMALL)
    run_workload(log)
    bases = [s.base_offset for s in log.segments]
    snapshots = list_snapshot_offsets(log.dir_path)
    assert len(bases) > 4
    assert snapshots == bases[-3:]
    log.close()


def test_corrupt_newest_snapshot_falls_back_and_logs_one_line(tmp_path, caplog):
    log = open_log(tmp_path, SMALL)
    states = run_workload(log)
    end = log.log_end_offset
    log.close()
    path = snapshot_path(log.dir_path, end)
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff")
    caplog.set_level(logging.WARNING, "onceflow.log")
    reopened = open_log(tmp_path, SMALL, clean_shutdown=True)
    warnings = [r for r in caplog.records if "snapshot" in r.getMessage()]
    assert len(warnings) == 1 and str(end) in warnings[0].getMessage()
    assert state_of(reopened) == states[end]
    assert not os.path.exists(path)
    reopened.close()


def test_without_snapshots_a_full_replay_gives_identical_state(tmp_path):
    log = open_log(tmp_path, SMALL)
    states = run_workload(log)
    end = log.log_end_offset
    log.close()
    for offset in list_snapshot_offsets(log.dir_path):
        os.unlink(snapshot_path(log.dir_path, offset))
    reopened = open_log(tmp_path, SMALL, clean_shutdown=True)
    assert state_of(reopened) == states[end]
    reopened.close()


@pytest.mark.parametrize("cut_bytes", [1, 40])
def test_torn_tail_recovery_rebuilds_state_of_the_surviving_log(tmp_path, cut_bytes):
    log = open_log(tmp_path, SMALL)
    states = run_workload(log)
    log.append(marker(2, 0, abort=True, coordinator_epoch=1), origin=COORDINATOR)
    log.flush()
    before_marker = max(states)
    active = log.active_segment
    # crash: no close; the last record set (the ABORT marker) is torn
    os.truncate(active.log_path, active.size - cut_bytes)
    reopened = open_log(tmp_path, SMALL, clean_shutdown=False, recovery_point=0)
    assert reopened.log_end_offset == before_marker
    assert state_of(reopened) == states[before_marker]
    # the transaction the torn marker would have ended is open again and pins the LSO
    open_first = reopened.producer_state.last_entry(2).current_txn_first_offset
    assert open_first is not None
    reopened.flush()
    assert reopened.last_stable_offset == open_first
    reopened.close()


def test_unclean_restart_rebuilds_the_active_segment_txnindex(tmp_path):
    log = open_log(tmp_path)  # one segment: everything is in the active one
    states = run_workload(log)
    log.flush()
    end = log.log_end_offset
    # the .txnindex of the active segment is not fsynced with the group commit: lose it
    os.truncate(log.active_segment.txn_index.path, 0)
    reopened = open_log(tmp_path, clean_shutdown=False)
    assert state_of(reopened) == states[end]
    assert reopened.collect_aborted_transactions(0, end)
    reopened.close()


def test_damaged_txnindex_tail_is_cut_and_rebuilt(tmp_path, caplog):
    log = open_log(tmp_path, SMALL)
    states = run_workload(log)
    end = log.log_end_offset
    log.close()
    damaged = [s for s in log.segments[:-1] if s.txn_index.entries][-1]
    # a torn last entry: the first bytes of the file survive, the tail entry does not
    os.truncate(damaged.txn_index.path, os.path.getsize(damaged.txn_index.path) - 10)
    caplog.set_level(logging.WARNING, "onceflow.log")
    reopened = open_log(tmp_path, SMALL, clean_shutdown=True)
    assert any(".txnindex" in r.getMessage() for r in caplog.records)
    assert state_of(reopened) == states[end]
    reopened.close()


def test_truncate_to_rolls_producer_state_back_and_drops_later_snapshots(tmp_path):
    log = open_log(tmp_path, SMALL)
    states = run_workload(log)
    ends = sorted(states)
    target = ends[len(ends) // 2]
    log.truncate_to(target)
    assert log.log_end_offset == target
    assert state_of(log) == states[target]
    assert all(offset <= target for offset in list_snapshot_offsets(log.dir_path))
    log.close()


def test_snapshot_above_the_recovered_end_is_deleted(tmp_path):
    log = open_log(tmp_path)
    states = run_workload(log)
    end = log.log_end_offset
    log.close()
    # a snapshot from a future the crash took back
    future = snapshot_path(log.dir_path, end + 100)
    os.link(snapshot_path(log.dir_path, end), future)
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert not os.path.exists(future)
    assert state_of(reopened) == states[end]
    reopened.close()


def test_expired_entries_are_not_loaded_from_a_snapshot(tmp_path):
    log = open_log(tmp_path, producer_id_expiration_ms=1_000)
    log.append(producer_batch(1, 0, 0, timestamp=10_000))  # long idle by wall clock
    log.append(producer_batch(2, 0, 0, txn=True, timestamp=10_000))  # open txn: kept
    log.close()
    reopened = open_log(tmp_path, clean_shutdown=True, producer_id_expiration_ms=1_000)
    assert [p.producer_id for p in reopened.active_producers()] == [2]
    reopened.close()


def test_log_manager_shutdown_snapshots_and_restart_restores(tmp_path):
    # long enough that nothing expires on reload however slow the run; expiry is forced below
    props = {"producer.id.expiration.ms": 3_600_000}
    manager = LogManager(str(tmp_path), props)
    manager.start()
    assert manager.create_topic("t", 1).error == ErrorCode.NONE
    log = manager.get_log("t", 0)
    assert log.producer_state.producer_id_expiration_ms == 3_600_000
    states = run_workload(log)
    end = log.log_end_offset
    asyncio.run(manager.shutdown())
    assert end in list_snapshot_offsets(log.dir_path)
    again = LogManager(str(tmp_path), props)
    again.start()
    assert state_of(again.get_log("t", 0)) == states[end]
    # producers 1 and 3 expire; 2 has an open transaction
    assert again.remove_expired_producers(now_ms=NOW + 3_600_000) == 2
    again.close()
