"""PartitionLog: appends, offsets, reads (KIP-74), rolls, LogAppendTime, retention, restart."""

from __future__ import annotations

import os

from log.log_helpers import fill, headers_of, make_batch, open_log, record_offsets, record_values
from onceflow.log import segment as segment_module
from onceflow.log.config import LogConfig
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import TimestampType, split_complete_batches, verify_crc


def test_append_assigns_consecutive_offsets_and_read_returns_them(tmp_path):
    log = open_log(tmp_path)
    first = log.append(make_batch(3) + make_batch(2))
    second = log.append(make_batch(4))
    assert (first.error, first.base_offset, first.last_offset, first.next_offset) == (0, 0, 4, 5)
    assert (second.base_offset, second.last_offset) == (5, 8)
    assert first.log_append_time == -1 and first.log_start_offset == 0
    assert log.log_end_offset == 9
    log.flush()
    result = log.read(0, 1 << 20)
    assert result.error == ErrorCode.NONE and result.high_watermark == 9
    assert record_offsets(result.records) == list(range(9))
    for header, view in split_complete_batches(result.records)[0]:
        assert verify_crc(view, header)
        assert header.partition_leader_epoch == 0


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3, records_per_batch=5)
    log.flush()
    headers = headers_of(log.read(7, 1 << 20).records)
    assert headers[0].base_offset == 5


def test_max_bytes_returns_whole_batches_only(tmp_path):
    log = open_log(tmp_path)
    fill(log, 10, value_size=100)
    log.flush()
    size = headers_of(log.read(0, 1 << 20).records)[0].total_size
    result = log.read(0, 3 * size + size // 2)
    assert len(result.records) == 3 * size
    assert record_offsets(result.records) == [0, 1, 2]


def test_oversized_first_batch_is_returned_whole_kip74(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(1, value_size=5000))
    log.append(make_batch(1))
    log.flush()
    result = log.read(0, 100)
    assert record_offsets(result.records) == [0]
    assert len(result.records) > 5000
    assert log.read(0, 100, min_one_message=False).records == b""


def test_read_stops_at_high_watermark_until_flushed(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2)
    assert log.high_watermark == 0
    assert log.read(0, 1 << 20).records == b""
    log.flush()
    fill(log, 1)
    assert record_offsets(log.read(0, 1 << 20).records) == [0, 1]
    assert record_offsets(log.read(0, 1 << 20, upper_bound_offset=1).records) == [0]


def test_offset_out_of_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, 3)
    log.flush()
    assert log.read(4, 100).error == ErrorCode.OFFSET_OUT_OF_RANGE
    at_end = log.read(3, 100)
    assert at_end.error == ErrorCode.NONE and at_end.records == b""
    log.delete_records(2)
    assert log.read(1, 100).error == ErrorCode.OFFSET_OUT_OF_RANGE
    assert record_offsets(log.read(2, 100).records) == [2]


def test_segment_roll_by_size_and_reads_across_segments(tmp_path):
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    log = open_log(tmp_path, config)
    fill(log, 40, value_size=60)
    log.flush()
    assert len(log.segments) > 3
    assert all(s.size <= 1000 for s in log.segments)
    names = sorted(os.listdir(log.dir_path))
    assert f"{log.segments[1].base_offset:020d}.log" in names
    offsets = []
    fetch = 0
    while fetch < log.high_watermark:
        records = log.read(fetch, 250).records
        got = record_offsets(records)
        assert got and got[0] == fetch
        offsets.extend(got)
        fetch = got[-1] + 1
    assert offsets == list(range(40))


def test_roll_when_index_full(tmp_path):
    config = LogConfig(index_interval_bytes=0, segment_index_bytes=8 * 4)
    log = open_log(tmp_path, config)
    fill(log, 20)
    assert len(log.segments) >= 3
    assert all(s.offset_index.entries <= 4 for s in log.segments)


def test_roll_by_segment_ms_uses_record_timestamps(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_ms=1000))
    log.append(make_batch(1, timestamp=10_000))
    log.append(make_batch(1, timestamp=10_500))
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=11_001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_record_set_larger_than_segment_is_rejected(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=500, max_message_bytes=10_000))
    assert log.append(make_batch(1, value_size=600)).error == ErrorCode.RECORD_LIST_TOO_LARGE
    assert log.log_end_offset == 0


def test_message_too_large_and_corrupt_framing(tmp_path):
    log = open_log(tmp_path, LogConfig(max_message_bytes=200))
    assert log.append(make_batch(1, value_size=500)).error == ErrorCode.MESSAGE_TOO_LARGE
    assert log.append(make_batch(1)[:-3]).error == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_append_with_parsed_headers_does_not_parse_again(tmp_path, monkeypatch):
    """The produce path passes the header it parsed; the log trusts it, checking only that the
    sizes cover the record set and stay within max.message.bytes (nothing written otherwise)."""
    log = open_log(tmp_path, LogConfig(max_message_bytes=200))
    small, large = make_batch(2), make_batch(1, value_size=500)
    monkeypatch.setattr("onceflow.log.partition_append.iter_batches", None)  # any parse would fail
    assert log.append(small + small, headers=headers_of(small)).error == ErrorCode.CORRUPT_MESSAGE
    too_large = log.append(large, headers=headers_of(large))
    assert too_large.error == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    assert log.append(small, headers=headers_of(small)).base_offset == 0
    assert log.append(small + small, headers=headers_of(small + small)).last_offset == 5


def test_log_append_time_patches_timestamp_and_crc(tmp_path):
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append(make_batch(2, timestamp=5), now_ms=123_456)
    assert result.log_append_time == 123_456
    log.flush()
    (header, view), *_ = split_complete_batches(log.read(0, 1 << 20).records)[0]
    assert header.max_timestamp == 123_456
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert verify_crc(view, header)
    assert log.offset_for_timestamp(100_000).offset == 0


def test_failed_write_leaves_no_partial_batch(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    fill(log, 2)
    size_before = log.active_segment.size
    real_pwrite = os.pwrite

    def half_then_fail(fd, data, position):
        if len(data) > 20:
            real_pwrite(fd, bytes(data[: len(data) // 2]), position)
            return len(data) // 2
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_module.os, "pwrite", half_then_fail)
    result = log.append(make_batch(3, value_size=100))
    monkeypatch.undo()
    assert result.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert os.path.getsize(log.active_segment.log_path) == size_before
    assert log.log_end_offset == 2
    assert log.append(make_batch(1)).error == ErrorCode.KAFKA_STORAGE_ERROR  # offline


def test_offset_for_timestamp_finds_the_record(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(3, timestamps=[100, 200, 300]))
    log.append(make_batch(2, timestamps=[250, 400]))
    log.flush()
    assert (log.offset_for_timestamp(150).offset, log.offset_for_timestamp(150).timestamp) == (
        1,
        200,
    )
    assert log.offset_for_timestamp(300).offset == 2
    assert log.offset_for_timestamp(301).offset == 4
    assert log.offset_for_timestamp(401) is None
    assert log.offset_for_timestamp(-2).offset == 0
    assert log.offset_for_timestamp(-1).offset == 5
    assert (log.offset_for_timestamp(-3).timestamp, log.offset_for_timestamp(-3).offset) == (400, 4)


def test_offset_for_timestamp_ignores_unflushed_records(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(1, timestamp=100))
    log.flush()
    log.append(make_batch(1, timestamp=500))
    assert log.offset_for_timestamp(200) is None


def test_retention_by_time_never_deletes_active_segment(tmp_path):
    config = LogConfig(segment_bytes=400, retention_ms=1000)
    log = open_log(tmp_path, config)
    for i in range(10):
        log.append(make_batch(1, value_size=150, timestamp=1000 + i))
    log.flush()
    segments = len(log.segments)
    assert segments >= 3
    assert log.delete_old_segments(now_ms=1500) == 0
    deleted = log.delete_old_segments(now_ms=10_000)
    assert deleted == segments - 1
    assert len(log.segments) == 1
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.read(0, 100).error == ErrorCode.OFFSET_OUT_OF_RANGE
    assert not os.path.exists(os.path.join(log.dir_path, f"{0:020d}.log"))


def test_retention_by_bytes(tmp_path):
    config = LogConfig(segment_bytes=400, retention_bytes=800, retention_ms=-1)
    log = open_log(tmp_path, config)
    fill(log, 12, value_size=150)
    log.flush()
    log.delete_old_segments(now_ms=0)
    assert len(log.segments) > 1
    assert log.size_bytes - log.segments[0].size < 800 <= log.size_bytes
    assert log.log_start_offset == log.segments[0].base_offset > 0


def test_retention_keeps_unflushed_segments_and_compacted_topics(tmp_path):
    config = LogConfig(segment_bytes=400, retention_ms=0)
    log = open_log(tmp_path, config)
    fill(log, 6, value_size=150)
    assert log.delete_old_segments(now_ms=10**12) == 0  # nothing below the high watermark
    compact = open_log(
        tmp_path / "c", LogConfig(segment_bytes=400, retention_ms=0, cleanup_policy=("compact",))
    )
    fill(compact, 6, value_size=150)
    compact.flush()
    assert compact.delete_old_segments(now_ms=10**12) == 0


def test_delete_records_persists_log_start_offset(tmp_path):
    log = open_log(tmp_path)
    fill(log, 5)
    log.flush()
    assert log.delete_records(7) == (ErrorCode.OFFSET_OUT_OF_RANGE, 0)
    assert log.delete_records(3) == (ErrorCode.NONE, 3)
    log.close()
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert reopened.log_start_offset == 3
    assert record_offsets(reopened.read(3, 1 << 20).records) == [3, 4]


def test_restart_keeps_everything_and_continues_offsets(tmp_path):
    config = LogConfig(segment_bytes=1000, index_interval_bytes=100)
    log = open_log(tmp_path, config)
    for i in range(30):
        log.append(make_batch(2, value_size=40, timestamp=1000 + 10 * i, tag=b"%d" % i))
    log.close()
    for clean in (True, False):
        log = open_log(tmp_path, config, clean_shutdown=clean)
        assert log.log_end_offset == 60 + (0 if clean else 2)
        assert log.high_watermark == log.log_end_offset
        assert log.offset_for_timestamp(1150).offset == 30
        assert log.segments[0].max_timestamp == max(
            h.max_timestamp for h in headers_of(log.read(0, 10**6).records)
        )
        result = log.append(make_batch(2))
        assert result.base_offset == log.log_end_offset - 2
        log.close()
    log = open_log(tmp_path, config)
    values = []
    fetch = 0
    while fetch < log.high_watermark:
        records = log.read(fetch, 10**6).records
        values.extend(record_values(records))
        fetch = record_offsets(records)[-1] + 1
    assert len(values) == 64 and values[0].startswith(b"0-0-")


def test_truncate_to_removes_the_tail(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=500))
    fill(log, 10, records_per_batch=2, value_size=50)
    log.flush()
    log.truncate_to(9)  # inside the batch 8..9: the whole batch goes
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert record_offsets(log.read(6, 10**6).records)[-1] <= 7
    assert log.append(make_batch(1)).base_offset == 8
