"""Group commit: one fsync round serves every produce waiting for durability at that moment.

Policy (onceflow's default, `flush.on.ack=true`): an acks=1/all produce is answered only after
its data is fsynced, and the high watermark is the flushed offset, so a consumer never reads a
record that a crash could take back. The handler appends, then ``await
committer.flushed(log, result.next_offset)``. The committer collects the waiting logs; a single
worker thread fsyncs every one of them in one round (`PartitionLog.flush`: fdatasync of the
active segment, fsync of rolled segments and their indexes, fsync of the directory after a
roll) and releases every waiter the round covered. Appends arriving while a round runs wait for
the next round, so under load each round carries many appends. The event loop never blocks on
fsync. acks=0 produce calls `request_flush(log)` so its data still becomes visible.

Deviation from Kafka: Kafka's default leaves flushing to the OS (`log.flush.interval.messages`
and `log.flush.interval.ms` unset). Topics with `flush.on.ack=false` (broker key
`log.flush.on.ack=false`) get Kafka's behaviour: `flushed` returns at once, the high watermark
is the log end offset, and data is fsynced once `flush.messages` offsets are unflushed, by
`flush_due` once `flush.ms` has passed, and after a segment roll.

A failed fsync takes the log offline (Kafka marks the log directory offline): its waiters and
later appends get KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from onceflow.common import wall_clock_ms
from onceflow.log.flush_times import FlushTimes
from onceflow.log.partition import PartitionLog
from onceflow.protocol.errors import ErrorCode

logger = logging.getLogger("onceflow.log")

FlushListener = Callable[[PartitionLog], None]


def _flush_logs(logs: list[PartitionLog], times: FlushTimes) -> list[int | OSError]:
    """Worker thread: flush each log, timing it; the covered offset or the error, per log."""
    outcomes: list[int | OSError] = []
    for log in logs:
        start = time.perf_counter()
        try:
            outcomes.append(log.flush())
        except OSError as exc:
            outcomes.append(exc)
        times.observe(time.perf_counter() - start)
    return outcomes


class GroupCommitter:
    """Batches fsyncs of partition logs for the produce path. Use from one event loop."""

    def __init__(self, executor: Executor | None = None) -> None:
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="onceflow-fsync"
        )
        self._waiters: dict[PartitionLog, list[tuple[int, asyncio.Future[ErrorCode]]]] = {}
        self._requested: set[PartitionLog] = set()
        self._task: asyncio.Task[None] | None = None
        self._listeners: list[FlushListener] = []
        self._closed = False
        self.rounds = 0  # fsync rounds run so far (observability, tests)
        self.flush_times = FlushTimes()  # per log flushed (broker.metrics)

    def add_listener(self, listener: FlushListener) -> None:
        """Call `listener(log)` on the loop after a round flushed `log` (its HW may have moved)."""
        self._listeners.append(listener)

    async def flushed(self, log: PartitionLog, offset: int) -> ErrorCode:
        """Return once every offset below `offset` in `log` is fsynced (flush.on.ack) or at once.

        NONE on success, KAFKA_STORAGE_ERROR when the log is offline or its fsync failed.
        """
        if log.failed is not None:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if not log.config.flush_on_ack:
            limit = log.config.flush_messages
            if (limit is not None and log.unflushed_messages >= limit) or log.has_rolled_unflushed:
                self.request_flush(log)
            return ErrorCode.NONE
        if log.flushed_offset >= offset:
            return ErrorCode.NONE
        if self._closed:
            raise RuntimeError("GroupCommitter is closed")
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(log, []).append((offset, future))
        self._ensure_running()
        return await future

    def request_flush(self, log: PartitionLog) -> None:
        """Schedule `log` for the next round without waiting (acks=0, interval flushes)."""
        if self._closed or log.failed is not None:
            return
        self._requested.add(log)
        self._ensure_running()

    def flush_due(self, logs: Iterable[PartitionLog], now_ms: int | None = None) -> int:
        """Schedule logs whose `flush.ms` elapsed or that rolled (periodic task); returns count."""
        now = wall_clock_ms() if now_ms is None else now_ms
        count = 0
        for log in logs:
            interval = log.config.flush_ms
            dirty = log.unflushed_messages > 0 or log.has_rolled_unflushed
            due = interval is not None and now - log.last_flush_ms >= interval
            if dirty and (due or log.has_rolled_unflushed):
                self.request_flush(log)
                count += 1
        return count

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """Run rounds until nobody waits; each round flushes every log collected so far."""
        loop = asyncio.get_running_loop()
        while self._waiters or self._requested:
            waiters, self._waiters = self._waiters, {}
            logs = list(waiters.keys() | self._requested)
            self._requested = set()
            try:
                outcomes = await loop.run_in_executor(
                    self._executor, _flush_logs, logs, self.flush_times
                )
            except BaseException as exc:
                for entries in waiters.values():
                    for _, future in entries:
                        if not future.done():
                            future.set_exception(exc)
                raise
            self.rounds += 1
            for log, outcome in zip(logs, outcomes, strict=True):
                self._release(log, outcome, waiters.get(log, ()))
                for listener in self._listeners:
                    try:
                        listener(log)
                    except Exception:  # a listener bug must not stall durability
                        logger.exception("flush listener failed for %s", log.name)

    def _release(
        self,
        log: PartitionLog,
        outcome: int | OSError,
        entries: Sequence[tuple[int, asyncio.Future[ErrorCode]]],
    ) -> None:
        for offset, future in entries:
            if future.done():  # the waiting request was cancelled
                continue
            if isinstance(outcome, OSError):
                future.set_result(ErrorCode.KAFKA_STORAGE_ERROR)
            elif outcome >= offset:
                future.set_result(ErrorCode.NONE)
            else:  # cannot happen: appends precede their waiters; keep it for the next round
                self._waiters.setdefault(log, []).append((offset, future))

    async def close(self) -> None:
        """Finish the running round (waiters get their answers), then stop the worker thread."""
        self._closed = True
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
        if self._own_executor and isinstance(self._executor, ThreadPoolExecutor):
            self._executor.shutdown(wait=True)
