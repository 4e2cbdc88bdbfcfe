"""Storage faults stay in their partition: damage to each file kind of one partition, after a
clean shutdown, is either recovered at start (a segment whose size or last batch does not match
what the clean shutdown recorded) or answered as that partition's CORRUPT_MESSAGE at read time;
the other partitions are untouched.

File kinds: `.log` (tail and mid-file), `.index`, `.timeindex`, `.txnindex`, `.snapshot`.
"""

from __future__ import annotations

import logging
import os
import random
import struct

import pytest

from log.log_helpers import make_batch, record_offsets
from log.producer_helpers import marker, producer_batch
from onceflow.log.config import LogConfig
from onceflow.log.manager import LogManager
from onceflow.log.producer_state import AppendOrigin
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import split_complete_batches

TOPIC = "t"
PARTITIONS = 3
# small index interval: every segment gets many index entries
PROPS = {"log.index.interval.bytes": 256}


def _manager(path) -> LogManager:
    manager = LogManager(str(path), PROPS)
    manager.start()
    return manager


def _filled(path, batches: int = 20) -> LogManager:
    manager = _manager(path)
    assert manager.create_topic(TOPIC, PARTITIONS).error == ErrorCode.NONE
    for partition in range(PARTITIONS):
        log = manager.get_log(TOPIC, partition)
        for _ in range(batches):
            log.append(make_batch(2, value_size=100))
        log.flush()
    return manager


def _segment_file(path, partition: int, suffix: str) -> str:
    directory = os.path.join(path, f"{TOPIC}-{partition}")
    names = sorted(n for n in os.listdir(directory) if n.endswith(suffix))
    return os.path.join(directory, names[-1])


def _batch_positions(log_path: str) -> list[int]:
    with open(log_path, "rb") as f:
        data = f.read()
    positions, pos = [], 0
    for header, _ in split_complete_batches(data)[0]:
        positions.append(pos)
        pos += header.total_size
    return positions


def _all_offsets(manager: LogManager, partition: int) -> list[int]:
    log = manager.get_log(TOPIC, partition)
    offsets, fetch = [], log.log_start_offset
    while fetch < log.high_watermark:
        result = log.read(fetch, 10**6)
        assert result.error == ErrorCode.NONE, (partition, fetch, result.error)
        got = record_offsets(result.records)
        offsets += [o for o in got if o >= fetch]
        fetch = offsets[-1] + 1
    return offsets


def _others_intact(manager: LogManager, damaged: int, end: int) -> None:
    for partition in range(PARTITIONS):
        if partition != damaged:
            assert _all_offsets(manager, partition) == list(range(end))


def test_bytes_appended_after_clean_shutdown_are_recovered(tmp_path, caplog):
    manager = _filled(tmp_path)
    manager.close()
    with open(_segment_file(tmp_path, 1, ".log"), "ab") as f:
        f.write(random.Random(7).randbytes(3000))  # a torn or foreign write
    with caplog.at_level(logging.INFO, logger="onceflow.log"):
        manager = _manager(tmp_path)
    log = manager.get_log(TOPIC, 1)
    assert log.log_end_offset == 40
    assert _all_offsets(manager, 1) == list(range(40))
    _others_intact(manager, 1, 40)
    assert any("recovered t-1" in r.getMessage() for r in caplog.records)
    assert log.append(make_batch(1)).base_offset == 40
    manager.close()


def test_a_valid_batch_appended_after_clean_shutdown_is_recovered(tmp_path):
    """A foreign write that is itself a well-formed batch (an older copy of the log's own
    first batch): its CRC checks, its offsets do not follow the log's."""
    manager = _filled(tmp_path)
    manager.close()
    path = _segment_file(tmp_path, 1, ".log")
    with open(path, "rb") as f:
        first = f.read(_batch_positions(path)[1])
    with open(path, "ab") as f:
        f.write(first)
    manager = _manager(tmp_path)
    assert manager.get_log(TOPIC, 1).log_end_offset == 40
    assert _all_offsets(manager, 1) == list(range(40))
    manager.close()


def test_last_batch_overwritten_after_clean_shutdown_is_recovered(tmp_path):
    """Same size, but the last batch's bytes changed: its CRC no longer matches."""
    manager = _filled(tmp_path)
    manager.close()
    path = _segment_file(tmp_path, 1, ".log")
    last = _batch_positions(path)[-1]
    with open(path, "r+b") as f:
        f.seek(last + 70)
        f.write(b"\xff" * 8)
    manager = _manager(tmp_path)
    assert manager.get_log(TOPIC, 1).log_end_offset == 38
    assert _all_offsets(manager, 1) == list(range(38))
    manager.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("length", [0, -7, 2**31 - 1], ids=["zero", "negative", "huge"])
def test_mid_file_damage_answers_corrupt_message_for_that_partition_only(tmp_path, caplog, length):
    manager = _filled(tmp_path)
    manager.close()
    path = _segment_file(tmp_path, 1, ".log")
    damaged = _batch_positions(path)[5]  # batch 5 holds offsets 10-11
    with open(path, "r+b") as f:
        f.seek(damaged + 8)
        f.write(struct.pack(">i", length))
    manager = _manager(tmp_path)
    log = manager.get_log(TOPIC, 1)
    assert record_offsets(log.read(0, 1000).records)[:2] == [0, 1]
    with caplog.at_level(logging.ERROR, logger="onceflow.log"):
        result = log.read(10, 10**6)
    assert result.error == ErrorCode.CORRUPT_MESSAGE
    assert result.records == b""
    lines = [r.getMessage() for r in caplog.records if "t-1" in r.getMessage()]
    assert len(lines) == 1 and "corrupt" in lines[0]
    _others_intact(manager, 1, 40)
    manager.close()


def _shift_index_entry(path: str, which: str) -> None:
    """Move the position of the `which` ("last" or "middle") `.index` entry one byte on."""
    with open(path, "r+b") as f:
        data = f.read()
        count = len(data) // 8
        at = 8 * (count - 1 if which == "last" else count // 2)
        relative, position = struct.unpack_from(">ii", data, at)
        f.seek(at)
        f.write(struct.pack(">ii", relative, position + 1))


def test_offset_index_last_entry_off_a_batch_boundary_is_rebuilt(tmp_path):
    manager = _filled(tmp_path)
    manager.close()
    _shift_index_entry(_segment_file(tmp_path, 1, ".index"), "last")
    manager = _manager(tmp_path)
    assert manager.get_log(TOPIC, 1).log_end_offset == 40
    assert _all_offsets(manager, 1) == list(range(40))
    _others_intact(manager, 1, 40)
    manager.close()


def test_offset_index_middle_entry_off_a_batch_boundary_reads_right(tmp_path):
    manager = _filled(tmp_path)
    manager.close()
    _shift_index_entry(_segment_file(tmp_path, 1, ".index"), "middle")
    manager = _manager(tmp_path)
    log = manager.get_log(TOPIC, 1)
    for offset in range(40):
        result = log.read(offset, 10**6)
        assert result.error == ErrorCode.NONE
        assert offset in record_offsets(result.records)
    manager.close()


def test_time_index_entry_past_the_log_end_is_rebuilt(tmp_path):
    manager = _filled(tmp_path)
    manager.close()
    path = _segment_file(tmp_path, 1, ".timeindex")
    with open(path, "r+b") as f:
        size = os.path.getsize(path)
        f.seek(size - 12)
        f.write(struct.pack(">qi", 5_000, 77))  # a later timestamp at an offset past the end
    manager = _manager(tmp_path)
    log = manager.get_log(TOPIC, 1)
    assert log.log_end_offset == 40
    found = log.offset_for_timestamp(1_001)
    assert found is not None and found.offset == 1
    _others_intact(manager, 1, 40)
    manager.close()


def test_txn_index_garbage_is_rebuilt(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic(TOPIC, 1)
    log = manager.get_log(TOPIC, 0)
    log.append(producer_batch(7, 0, 0, 2, txn=True))
    log.append(marker(7, 0, abort=True), origin=AppendOrigin.COORDINATOR)
    log.append(producer_batch(7, 0, 2, 1, txn=True))
    log.append(marker(7, 0, abort=False), origin=AppendOrigin.COORDINATOR)
    log.flush()
    assert log.collect_aborted_transactions(0, 10) == [(7, 0)]
    manager.close()
    path = _segment_file(tmp_path, 0, ".txnindex")
    with open(path, "r+b") as f:
        f.write(b"\x7f" * os.path.getsize(path))  # an entry of an unknown version
    manager = _manager(tmp_path)
    log = manager.get_log(TOPIC, 0)
    assert log.collect_aborted_transactions(0, 10) == [(7, 0)]
    manager.close()


def test_producer_snapshot_garbage_falls_back_to_the_log(tmp_path):
    config = LogConfig(segment_bytes=600)
    manager = _manager(tmp_path)
    manager.create_topic(TOPIC, 1, {"segment.bytes": str(config.segment_bytes)})
    log = manager.get_log(TOPIC, 0)
    for seq in range(0, 20, 2):
        assert log.append(producer_batch(9, 0, seq, 2, tag=b"x" * 50)).error == ErrorCode.NONE
    log.flush()
    manager.close()
    directory = os.path.join(tmp_path, f"{TOPIC}-0")
    for name in os.listdir(directory):
        if name.endswith(".snapshot"):
            path = os.path.join(directory, name)
            with open(path, "r+b") as f:
                f.seek(8)
                f.write(b"\xa5" * max(1, os.path.getsize(path) - 8))
    manager = _manager(tmp_path)
    log = manager.get_log(TOPIC, 0)
    duplicate = log.append(producer_batch(9, 0, 18, 2, tag=b"x" * 50))
    assert duplicate.duplicate and duplicate.base_offset == 18
    assert log.append(producer_batch(9, 0, 20, 1)).error == ErrorCode.NONE
    gap = log.append(producer_batch(9, 0, 30, 1))
    assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    manager.close()
