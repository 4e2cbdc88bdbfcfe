"""A crash at every step of a cleaning round's swap leaves a log that loads and reads the same
as before or after the round: the latest value of every key is unchanged; each group of
segments the round rewrites reads exactly as before the round or as a completed round leaves
it (groups are swapped one at a time, each atomically); no `.cleaned`/`.swap`/`.deleted` file
remains; a later round finishes the job.

The crash is simulated in-process (the hook raises and the log manager is abandoned without
closing, as kill -9 leaves it: the page cache survives a process kill).
"""

from __future__ import annotations

import os
import shutil

import pytest

from log.cleaner.cleaner_helpers import compacted_manager, keyed_batch, log_batches, read_view
from onceflow.log.cleaner.swap import CRASH_POINTS
from onceflow.records.record import decode_records


def compacted_manager_copy(source, target):
    """A manager on a copy of the data directory `source` (taken while its logs are open)."""
    shutil.copytree(source, target)
    return compacted_manager(target)


def _is_cleaned_prefix(after, before, cleaned) -> bool:
    """`after` is `cleaned` below some offset and `before` from there on."""
    for bound in sorted(set(before)) + [max(before) + 1]:
        mixed = {o: r for o, r in cleaned.items() if o < bound}
        mixed.update((o, r) for o, r in before.items() if o >= bound)
        if after == mixed:
            return True
    return False


class Crash(Exception):
    pass


def _records(log) -> dict[int, tuple[bytes, bytes | None]]:
    out = {}
    for header, data in log_batches(log):
        for record in decode_records(data):
            out[header.base_offset + record.offset_delta] = (record.key, record.value)
    return out


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_at_each_swap_step_keeps_the_log(tmp_path, point):
    manager = compacted_manager(tmp_path)
    log = manager.get_log("c", 0)
    for i in range(300):
        value = None if i % 37 == 0 else b"value-%d" % i
        log.append(keyed_batch([(b"key-%d" % (i % 15), value)]))
    log.flush()
    before = _records(log)
    view = read_view(log, committed=True)
    twin = compacted_manager_copy(tmp_path, tmp_path.parent / f"{tmp_path.name}-twin")
    twin_log = twin.get_log("c", 0)
    twin.cleaner.clean_log(twin_log, now_ms=10**6)
    cleaned = _records(twin_log)
    twin.close()
    assert cleaned != before

    def hook(reached: str) -> None:
        if reached == point:
            raise Crash(point)

    manager.cleaner._crash_hook = lambda: hook
    with pytest.raises(Crash):
        manager.cleaner.clean_log(log, now_ms=10**6)
    # abandoned, not closed: a new manager opens the directory as after kill -9

    manager = compacted_manager(tmp_path)
    log = manager.get_log("c", 0)
    leftovers = [
        n for n in os.listdir(log.dir_path) if n.endswith((".cleaned", ".swap", ".deleted"))
    ]
    assert leftovers == []
    assert _is_cleaned_prefix(_records(log), before, cleaned)
    assert read_view(log, committed=True) == view
    assert log.log_end_offset == 300
    manager.cleaner.clean_log(log, now_ms=10**6)
    assert read_view(log, committed=True) == view
    assert log.size_bytes < sum(len(k) + len(v or b"") for k, v in before.values())
    manager.close()
