"""Recovery on open: torn and corrupt tails, bad offsets, missing or damaged indexes."""

from __future__ import annotations

import logging
import os

from log.log_helpers import fill, make_batch, open_log, record_offsets
from onceflow.log.config import LogConfig
from onceflow.records.batch import split_complete_batches


def _log_file(log, index=-1):
    return log.segments[index].log_path


def _batch_positions(path):
    with open(path, "rb") as f:
        data = f.read()
    positions, pos = [], 0
    for header, _ in split_complete_batches(data)[0]:
        positions.append((pos, header))
        pos += header.total_size
    return positions


def test_torn_tail_is_truncated_at_last_whole_batch(tmp_path, caplog):
    log = open_log(tmp_path)
    fill(log, 5, value_size=100)
    path = _log_file(log)
    last_pos, last = _batch_positions(path)[-1]
    log.close()
    os.truncate(path, last_pos + last.total_size // 2)
    with caplog.at_level(logging.INFO, logger="onceflow.log"):
        log = open_log(tmp_path)
    assert log.log_end_offset == 4
    assert os.path.getsize(path) == last_pos
    assert record_offsets(log.read(0, 10**6).records) == [0, 1, 2, 3]
    lines = [r.getMessage() for r in caplog.records if "recovered t-0" in r.getMessage()]
    assert len(lines) == 1
    assert "truncated" in lines[0] and "at offset 4" in lines[0] and "torn" in lines[0]
    assert log.append(make_batch(1)).base_offset == 4


def test_corrupt_tail_crc_mismatch_is_truncated(tmp_path, caplog):
    log = open_log(tmp_path)
    fill(log, 6, value_size=100)
    path = _log_file(log)
    pos, header = _batch_positions(path)[3]
    log.close()
    with open(path, "r+b") as f:
        f.seek(pos + header.total_size - 5)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with caplog.at_level(logging.WARNING, logger="onceflow.log"):
        log = open_log(tmp_path)
    assert log.log_end_offset == 3
    assert record_offsets(log.read(0, 10**6).records) == [0, 1, 2]
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "CRC mismatch" in message and "at offset 3" in message


def test_garbage_length_is_treated_as_torn(tmp_path, caplog):
    log = open_log(tmp_path)
    fill(log, 3)
    path = _log_file(log)
    size = os.path.getsize(path)
    log.close()
    with open(path, "ab") as f:
        f.write(b"\x00" * 8 + (10**6).to_bytes(4, "big") + b"\x00" * 60)
    with caplog.at_level(logging.WARNING, logger="onceflow.log"):
        log = open_log(tmp_path)
    assert log.log_end_offset == 3 and os.path.getsize(path) == size
    assert "truncated 72 bytes" in caplog.text


def test_non_monotonic_offsets_are_cut(tmp_path, caplog):
    log = open_log(tmp_path)
    fill(log, 4)
    path = _log_file(log)
    pos, _ = _batch_positions(path)[2]
    log.close()
    with open(path, "r+b") as f:  # base offset is outside the CRC: only the offset check sees it
        f.seek(pos)
        f.write((0).to_bytes(8, "big"))
    with caplog.at_level(logging.WARNING, logger="onceflow.log"):
        log = open_log(tmp_path)
    assert log.log_end_offset == 2
    assert "non-monotonic" in caplog.text


def test_corruption_in_an_older_segment_drops_later_segments(tmp_path, caplog):
    config = LogConfig(segment_bytes=600)
    log = open_log(tmp_path, config)
    fill(log, 12, value_size=100)
    assert len(log.segments) >= 3
    second = log.segments[1]
    path, base = second.log_path, second.base_offset
    log.close()
    with open(path, "r+b") as f:
        f.seek(70)
        f.write(b"\xff\xff")
    with caplog.at_level(logging.WARNING, logger="onceflow.log"):
        log = open_log(tmp_path, config)  # unclean, recovery point 0: every segment checked
    assert log.log_end_offset == base
    assert len(log.segments) == 2
    assert "deleted" in caplog.text and "later segment" in caplog.text


def test_missing_index_is_rebuilt_even_after_clean_shutdown(tmp_path, caplog):
    config = LogConfig(index_interval_bytes=100)
    log = open_log(tmp_path, config)
    fill(log, 20, value_size=100)
    entries = log.active_segment.offset_index.entries
    index_path = log.active_segment.offset_index.path
    log.close()
    os.unlink(index_path)
    with caplog.at_level(logging.WARNING, logger="onceflow.log"):
        log = open_log(tmp_path, config, clean_shutdown=True)
    assert log.active_segment.offset_index.entries == entries
    assert os.path.getsize(index_path) == entries * 8
    assert "rebuilt indexes" in caplog.text and ".index missing" in caplog.text
    assert record_offsets(log.read(13, 10**6).records)[0] == 13


def test_corrupted_index_is_rebuilt(tmp_path, caplog):
    config = LogConfig(index_interval_bytes=100)
    log = open_log(tmp_path, config)
    fill(log, 20, value_size=100)
    index_path = log.active_segment.offset_index.path
    good = open(index_path, "rb").read()
    log.close()
    with open(index_path, "r+b") as f:  # an entry pointing far past the end of the log
        f.seek(len(good) - 4)
        f.write((10**8).to_bytes(4, "big"))
    with caplog.at_level(logging.WARNING, logger="onceflow.log"):
        log = open_log(tmp_path, config, clean_shutdown=True)
    assert open(index_path, "rb").read() == good
    assert "rebuilt indexes" in caplog.text
    for offset in range(20):
        assert record_offsets(log.read(offset, 1).records) == [offset]
    log.close()
    with open(index_path, "ab") as f:  # a partial entry
        f.write(b"\x01\x02\x03")
    log = open_log(tmp_path, config, clean_shutdown=True)
    assert open(index_path, "rb").read() == good


def test_clean_shutdown_skips_validation(tmp_path, caplog):
    log = open_log(tmp_path)
    fill(log, 3)
    log.close()
    with caplog.at_level(logging.INFO, logger="onceflow.log"):
        open_log(tmp_path, clean_shutdown=True).close()
    assert "recovered" not in caplog.text
    with caplog.at_level(logging.INFO, logger="onceflow.log"):
        open_log(tmp_path).close()
    assert "recovered t-0: checked 1 segment(s) from offset 0, no damage" in caplog.text


def test_recovery_point_limits_the_segments_checked(tmp_path, caplog):
    config = LogConfig(segment_bytes=600)
    log = open_log(tmp_path, config)
    fill(log, 12, value_size=100)
    bases = [s.base_offset for s in log.segments]
    log.close()
    with caplog.at_level(logging.INFO, logger="onceflow.log"):
        open_log(tmp_path, config, recovery_point=bases[-1]).close()
    assert f"checked 1 segment(s) from offset {bases[-1]}" in caplog.text
