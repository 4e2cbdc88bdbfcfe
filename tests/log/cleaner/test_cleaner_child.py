"""The cleaning pass in a child process (`log.cleaner.child`): it writes exactly what the
in-thread pass writes, and a child killed mid-round (kill -9) leaves the log as it was, no
`.cleaned` file, one error line, and a cleaner task that tries again and succeeds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

from log.cleaner.cleaner_helpers import compacted_manager, end_txn, keyed_batch, read_view
from onceflow.log.cleaner.throttler import Throttler

NOW = 100_000


def _fill(log, rounds: int) -> None:
    """Overwritten keys, tombstones, committed and aborted transactions, then enough filler to
    roll it all out of the active segment."""
    for n in range(rounds):
        pairs = [(b"k%d" % (i % 7), None if i % 5 == 4 else b"v%d-%d" % (n, i)) for i in range(6)]
        log.append(keyed_batch(pairs, timestamp=NOW + n), now_ms=NOW)
        if n % 3 == 1:
            txn = keyed_batch([(b"t%d" % (n % 4), b"x%d" % n)], pid=7, epoch=0, seq=n, txn=True)
            log.append(txn, now_ms=NOW)
            end_txn(log, 7, 0, abort=n % 2 == 0)
    for i in range(20):
        log.append(keyed_batch([(b"filler", b"%d" % i)], timestamp=NOW + rounds), now_ms=NOW)
    log.flush()


def _files(path) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            if name.endswith((".log", ".index", ".timeindex", ".txnindex", ".cleaned")):
                with open(os.path.join(root, name), "rb") as f:
                    out[name] = f.read()
    return out


def _shape(log) -> list[tuple[int, int, int, int]]:
    return [(s.base_offset, s.next_offset, s.size, s.max_timestamp) for s in log.segments]


def test_a_child_writes_what_the_thread_writes(tmp_path):
    managers = [compacted_manager(tmp_path / "thread"), compacted_manager(tmp_path / "child")]
    logs = [manager.get_log("c", 0) for manager in managers]
    for now in (NOW + 10_000, NOW + 20_000):  # the second round drops the tombstones
        for log in logs:
            _fill(log, 60)
        stats = [
            managers[0].cleaner.clean_log(logs[0], now_ms=now),
            managers[1].cleaner.clean_log(logs[1], now_ms=now, in_child=True),
        ]
        assert stats[0] is not None and stats[0] == stats[1]
        assert stats[0].records_removed > 0
        assert _shape(logs[0]) == _shape(logs[1])
        assert _files(tmp_path / "thread") == _files(tmp_path / "child")
    for log in logs:  # the segments the broker loaded from the child's files take appends
        _fill(log, 5)
    assert _files(tmp_path / "thread") == _files(tmp_path / "child")
    assert read_view(logs[1], committed=True) == read_view(logs[0], committed=True)
    for manager in managers:
        manager.close()


def test_a_child_killed_mid_round_leaves_the_log_and_the_cleaner_retries(tmp_path, caplog):
    manager = compacted_manager(tmp_path)
    log = manager.get_log("c", 0)
    _fill(log, 400)
    cleaner = manager.cleaner
    assert cleaner.in_child
    cleaner.backoff_ms = 1_000
    cleaner.throttler = Throttler(20_000)  # a round of seconds: time to kill it
    before = read_view(log, committed=True)
    segments_before = len(log.segments)
    size_before = sum(s.size for s in log.segments)

    def cleaned_files() -> list[str]:
        return [name for name in os.listdir(log.dir_path) if name.endswith(".cleaned")]

    def failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno >= logging.ERROR]

    async def until(condition, what: str) -> None:
        for _ in range(3_000):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}")

    async def scenario() -> None:
        task = asyncio.get_running_loop().create_task(cleaner.run())
        await until(lambda: cleaner.child is not None and cleaner.child.pid, "the child")
        await until(cleaned_files, "the child's first .cleaned file")
        os.kill(cleaner.child.pid, signal.SIGKILL)
        cleaner.throttler = Throttler(float("inf"))
        await until(failures, "the failure line")
        assert not cleaned_files()  # removed before the line is logged
        assert read_view(log, committed=True) == before
        assert len(log.segments) == segments_before
        assert not task.done()
        await until(lambda: cleaner.totals.records_removed > 0, "the retried round")
        assert not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with caplog.at_level(logging.INFO, logger="onceflow.log.cleaner"):
        asyncio.run(scenario())
    [line] = failures()
    assert "killed by signal 9" in line.getMessage()
    assert "c-0" in line.getMessage()
    assert not cleaned_files()
    assert sum(s.size for s in log.segments) < size_before
    assert read_view(log, committed=True) == before
    manager.close()


SCHED_OTHER, SCHED_IDLE = 0, 5  # the policy numbers in /proc/<pid>/stat (field 41)


def _policy_and_nice(pid: int) -> tuple[int, int]:
    """(scheduling policy, niceness) of `pid`, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # fields from the 3rd on
    return int(fields[40 - 2]), int(fields[18 - 2])


@pytest.mark.parametrize(
    ("sched_idle", "policy"), [(True, SCHED_IDLE), (False, SCHED_OTHER)], ids=["idle", "niced"]
)
def test_the_child_runs_niced_and_under_sched_idle_unless_told_not_to(tmp_path, sched_idle, policy):
    """`onceflow.log.cleaner.process.sched.idle` (default true): the child of a round leaves
    the CPU to any broker thread that wakes (SCHED_IDLE), besides its niceness."""
    manager = compacted_manager(tmp_path)
    log = manager.get_log("c", 0)
    _fill(log, 400)
    cleaner = manager.cleaner
    cleaner.child_sched_idle = sched_idle
    cleaner.throttler = Throttler(20_000)  # a round of seconds
    own_nice = os.nice(0)

    async def scenario() -> tuple[int, int]:
        task = asyncio.get_running_loop().create_task(cleaner.run())
        try:
            for _ in range(3_000):  # the first .cleaned file: the child has set its priority
                child = cleaner.child
                if (
                    child is not None
                    and child.pid
                    and any(name.endswith(".cleaned") for name in os.listdir(log.dir_path))
                ):
                    return _policy_and_nice(child.pid)
                await asyncio.sleep(0.01)
            raise AssertionError("no child wrote a .cleaned file")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    assert asyncio.run(scenario()) == (policy, min(19, own_nice + 10))
    manager.close()
