"""Group commit: one fsync round serves every waiting append; HW covers only flushed data."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
import time

from log.log_helpers import make_batch, open_log
from onceflow.log import segment as segment_module
from onceflow.log.config import LogConfig
from onceflow.log.durability import GroupCommitter
from onceflow.protocol.errors import ErrorCode


class FsyncCounter:
    """Stands in for os.fdatasync: counts calls, optionally slow, optionally failing."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.calls = 0
        self.delay = delay
        self.fail = fail
        self.threads: set[str] = set()
        self.lock = threading.Lock()
        self.observe = None

    def __call__(self, fd: int) -> None:
        with self.lock:
            self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.observe is not None:
            self.observe()
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise OSError(5, "Input/output error")


def test_concurrent_waiters_share_fsyncs(tmp_path, monkeypatch):
    counter = FsyncCounter(delay=0.02)
    monkeypatch.setattr(segment_module.os, "fdatasync", counter)
    log = open_log(tmp_path)
    committer = GroupCommitter()

    async def produce(i: int) -> ErrorCode:
        await asyncio.sleep(0.001 * (i % 7))
        result = log.append(make_batch(1, tag=b"%d" % i))
        assert log.high_watermark < result.next_offset  # not visible before the fsync
        return await committer.flushed(log, result.next_offset)

    async def main():
        results = await asyncio.gather(*(produce(i) for i in range(60)))
        await committer.close()
        return results

    results = asyncio.run(main())
    assert results == [ErrorCode.NONE] * 60
    assert 1 <= counter.calls < 20
    assert committer.rounds == counter.calls
    assert log.high_watermark == log.log_end_offset == 60
    assert all(name.startswith("onceflow-fsync") for name in counter.threads)


def test_high_watermark_moves_only_after_the_fsync(tmp_path, monkeypatch):
    counter = FsyncCounter()
    log = open_log(tmp_path)
    seen = []
    counter.observe = lambda: seen.append((log.high_watermark, log.log_end_offset))
    monkeypatch.setattr(segment_module.os, "fdatasync", counter)
    committer = GroupCommitter()

    async def main():
        result = log.append(make_batch(3))
        assert await committer.flushed(log, result.next_offset) == ErrorCode.NONE
        await committer.close()

    asyncio.run(main())
    assert seen == [(0, 3)]
    assert log.high_watermark == 3


def test_event_loop_keeps_running_during_a_slow_fsync(tmp_path, monkeypatch):
    monkeypatch.setattr(segment_module.os, "fdatasync", FsyncCounter(delay=0.3))
    log = open_log(tmp_path)
    committer = GroupCommitter()
    ticks = []

    async def ticker():
        for _ in range(10):
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main():
        result = log.append(make_batch(1))
        started = time.monotonic()
        await asyncio.gather(committer.flushed(log, result.next_offset), ticker())
        await committer.close()
        return started

    started = asyncio.run(main())
    assert len(ticks) == 10 and ticks[-1] - started < 0.3


def test_fsync_failure_reports_storage_error_and_takes_log_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(segment_module.os, "fdatasync", FsyncCounter(fail=True))
    log = open_log(tmp_path)
    committer = GroupCommitter()

    async def main():
        result = log.append(make_batch(1))
        first = await committer.flushed(log, result.next_offset)
        second = await committer.flushed(log, result.next_offset)
        await committer.close()
        return first, second

    assert asyncio.run(main()) == (ErrorCode.KAFKA_STORAGE_ERROR,) * 2
    assert log.append(make_batch(1)).error == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.read(0, 100).error == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.high_watermark == 0


def test_flush_on_ack_off_behaves_like_kafka(tmp_path, monkeypatch):
    counter = FsyncCounter()
    monkeypatch.setattr(segment_module.os, "fdatasync", counter)
    config = LogConfig(flush_on_ack=False, flush_messages=5)
    log = open_log(tmp_path, config)
    committer = GroupCommitter()

    async def main():
        for _ in range(3):
            result = log.append(make_batch(1))
            assert await committer.flushed(log, result.next_offset) == ErrorCode.NONE
        assert log.high_watermark == 3 and counter.calls == 0
        result = log.append(make_batch(2))
        await committer.flushed(log, result.next_offset)  # 5 unflushed: schedules a flush
        await committer.close()

    asyncio.run(main())
    assert counter.calls == 1 and log.flushed_offset == 5


def test_flush_due_and_request_flush(tmp_path, monkeypatch):
    counter = FsyncCounter()
    monkeypatch.setattr(segment_module.os, "fdatasync", counter)
    lazy = open_log(tmp_path / "a", LogConfig(flush_on_ack=False, flush_ms=1000))
    durable = open_log(tmp_path / "b")
    committer = GroupCommitter()
    flushed = []
    committer.add_listener(flushed.append)

    async def main():
        lazy.append(make_batch(1))
        assert committer.flush_due([lazy], now_ms=lazy.last_flush_ms + 10) == 0
        assert committer.flush_due([lazy], now_ms=lazy.last_flush_ms + 1000) == 1
        durable.append(make_batch(1))  # acks=0: nobody waits, data must still become visible
        committer.request_flush(durable)
        await committer.close()

    asyncio.run(main())
    assert lazy.flushed_offset == 1 and durable.high_watermark == 1
    assert set(flushed) == {lazy, durable}


def test_roll_fsyncs_old_segment_indexes_and_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(segment_module.os, "fdatasync", lambda fd: synced.append("data"))

    def fsync(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    log = open_log(tmp_path, dataclasses.replace(LogConfig(), segment_bytes=300))
    monkeypatch.setattr(os, "fsync", fsync)
    log.append(make_batch(1, value_size=200))
    log.append(make_batch(1, value_size=200))  # rolls
    log.flush()
    monkeypatch.undo()
    assert f"{0:020d}.index" in synced and f"{0:020d}.timeindex" in synced
    assert "t-0" in synced and synced.count("data") == 2
