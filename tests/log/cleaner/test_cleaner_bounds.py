"""What a round may touch: never the active segment, nothing at or past the last stable offset
(an open transaction and everything after it), nothing newer than min.compaction.lag.ms; and
`compact,delete` logs are compacted too."""

from __future__ import annotations

from log.cleaner.cleaner_helpers import compacted_manager, end_txn, keyed_batch
from onceflow.records.batch import split_complete_batches


def _offsets(log) -> list[int]:
    out, offset = [], log.log_start_offset
    while offset < log.high_watermark:
        batches = split_complete_batches(log.read(offset, 10**7).records)[0]
        if not batches:
            break
        for header, _ in batches:
            if header.records_count:
                out.append(header.base_offset)
            offset = header.last_offset + 1
    return out


def _fill(log, start: int, count: int) -> None:
    for i in range(start, start + count):
        log.append(keyed_batch([(b"same-key", b"value-%d" % i)]))
    log.flush()


def test_nothing_at_or_after_an_open_transaction_is_cleaned(tmp_path):
    manager = compacted_manager(tmp_path)
    log = manager.get_log("c", 0)
    _fill(log, 0, 40)
    log.append(keyed_batch([(b"txn-key", b"open")], pid=7, epoch=0, txn=True))
    open_at = log.log_end_offset - 1
    _fill(log, 41, 60)
    assert log.last_stable_offset == open_at
    manager.cleaner.clean_log(log, now_ms=10**9)
    kept = _offsets(log)
    assert [o for o in kept if o >= open_at] == list(range(open_at, log.log_end_offset))
    assert len([o for o in kept if o < open_at]) < 40  # below it, the key was deduplicated
    assert end_txn(log, 7, 0, abort=False).error == 0
    log.flush()
    manager.cleaner.clean_log(log, now_ms=10**9)
    active = log.active_segment.base_offset
    assert [o for o in _offsets(log) if o >= active] == list(range(active, log.log_end_offset))
    manager.close()


def test_min_compaction_lag_keeps_recent_segments(tmp_path):
    manager = compacted_manager(tmp_path, **{"min.compaction.lag.ms": "1000000"})
    log = manager.get_log("c", 0)
    _fill(log, 0, 80)  # record timestamps are 1000 ms
    assert manager.cleaner.clean_log(log, now_ms=500_000) is None  # all within the lag
    assert manager.cleaner.clean_log(log, now_ms=5_000_000) is not None
    manager.close()


def test_compact_delete_logs_are_compacted(tmp_path):
    manager = compacted_manager(tmp_path, **{"cleanup.policy": "compact,delete"})
    log = manager.get_log("c", 0)
    _fill(log, 0, 80)
    before = len(_offsets(log))
    stats = manager.cleaner.clean_log(log, now_ms=10**9)
    assert stats is not None and stats.records_removed > 0
    assert len(_offsets(log)) < before
    manager.close()
