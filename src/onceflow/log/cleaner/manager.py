"""Which log the cleaner cleans next, its checkpoint, its stats, and its background task
(Kafka's `LogCleanerManager` and `LogCleaner`).

A log is a candidate when its `cleanup.policy` includes `compact` and either its dirty ratio
reaches `min.cleanable.dirty.ratio` or its oldest dirty record is older than
`max.compaction.lag.ms`; the candidate with the highest ratio is cleaned first. After a round
the log's first dirty offset (the round's first uncleanable offset) is written to the data
directory's `cleaner-offset-checkpoint` (Kafka's name and format).

Broker settings that apply: `log.cleaner.enable` (default true), `log.cleaner.backoff.ms`
(default 15000: the pause when no log needs cleaning), `log.cleaner.min.cleanable.ratio`,
`log.cleaner.delete.retention.ms`, `log.cleaner.min.compaction.lag.ms`,
`log.cleaner.max.compaction.lag.ms` (topic defaults, `log.config`),
`log.cleaner.io.max.bytes.per.second` (bytes read, default unlimited as Kafka's; `throttler`).
`log.cleaner.threads` is
accepted, but there is one cleaner: an asyncio task that prepares and swaps on the event loop
and has the cleaned segments written by a child process niced by
`onceflow.log.cleaner.process.nice` and run under Linux's SCHED_IDLE policy
(`onceflow.log.cleaner.process.sched.idle`) (`child`), one log at a time;
`onceflow.log.cleaner.process=false` writes them in a worker thread of the broker instead (it
then competes with produce for the interpreter lock).
`log.cleaner.dedupe.buffer.size` and `log.cleaner.io.buffer.*` are accepted without effect (the
offset map is an exact dict).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from onceflow.common import wall_clock_ms
from onceflow.log.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from onceflow.log.cleaner.child import (
    DEFAULT_NICE,
    CleanerChild,
    CleanerChildFailed,
    CleaningJob,
    open_cleaned,
    remove_cleaned,
    run_child_blocking,
)
from onceflow.log.cleaner.cleaner import CleanerStats, CleaningRound, cleanable_range, prepare_round
from onceflow.log.cleaner.swap import CRASH_KEY, CRASH_POINTS
from onceflow.log.cleaner.throttler import Throttler
from onceflow.process import crash

logger = logging.getLogger("onceflow.log.cleaner")

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
PROCESS_KEY = "onceflow.log.cleaner.process"
NICE_KEY = "onceflow.log.cleaner.process.nice"
SCHED_IDLE_KEY = "onceflow.log.cleaner.process.sched.idle"


@dataclass
class LogCleaningState:
    """What the cleaner knows of one log: its first dirty offset and its last round."""

    first_dirty: int = 0
    last_clean_ms: int | None = None


class LogCleanerManager:
    """Chooses, runs and records cleaning rounds for the logs of a `LogManager`."""

    def __init__(self, logs: Any, broker_props: Mapping[str, object] | None = None) -> None:
        props = dict(broker_props or {})
        # the LogManager; not named, because log.manager imports this module (a type import
        # would close a cycle the import-graph test refuses); its logs are typed Any likewise
        self.logs = logs
        self.enabled = str(props.get("log.cleaner.enable", "true")).strip().lower() == "true"
        self.backoff_ms = int(str(props.get("log.cleaner.backoff.ms", 15_000)))
        # one throttler for the cleaner, as Kafka's (shared by its threads)
        self.throttler = Throttler(
            float(str(props.get("log.cleaner.io.max.bytes.per.second", float("inf"))))
        )
        self.in_child = str(props.get(PROCESS_KEY, "true")).strip().lower() == "true"
        self.child_nice = min(19, max(0, int(str(props.get(NICE_KEY, DEFAULT_NICE)))))
        self.child_sched_idle = str(props.get(SCHED_IDLE_KEY, "true")).strip().lower() == "true"
        self.child: CleanerChild | None = None  # the running round's child process
        point = str(props.get(CRASH_KEY, "")).strip()
        if point and point not in CRASH_POINTS:
            raise ValueError(f"{CRASH_KEY} must be one of {', '.join(CRASH_POINTS)}")
        self._crash_point = point or None
        self.states: dict[tuple[str, int], LogCleaningState] = {}
        self.totals = CleanerStats()
        self.last_run_monotonic: float | None = None
        self._load_checkpoints()

    # -- state ---------------------------------------------------------------------------------

    def _load_checkpoints(self) -> None:
        for log_dir in self.logs.log_dirs:
            for key, offset in read_offset_checkpoint(
                os.path.join(log_dir, CHECKPOINT_FILE)
            ).items():
                self.states[key] = LogCleaningState(first_dirty=offset)

    def _write_checkpoints(self) -> None:
        for log_dir in self.logs.log_dirs:
            entries = [
                (topic, partition, state.first_dirty)
                for (topic, partition), state in sorted(self.states.items())
                if self.logs.log_dir_of(topic, partition) == log_dir
            ]
            write_offset_checkpoint(os.path.join(log_dir, CHECKPOINT_FILE), entries)

    def seconds_since_last_run(self) -> float | None:
        """Seconds since a round ran or the task found nothing to clean (None: never)."""
        if self.last_run_monotonic is None:
            return None
        return time.monotonic() - self.last_run_monotonic

    def state_of(self, log: Any) -> LogCleaningState:
        """The cleaning state of `log` (created at first dirty offset 0)."""
        return self.states.setdefault((log.topic, log.partition), LogCleaningState())

    def dirty_ratio(self, log: Any, now_ms: int | None = None) -> float:
        """The dirty ratio of a compacted log now (0 for others)."""
        if "compact" not in log.config.cleanup_policy:
            return 0.0
        now = wall_clock_ms() if now_ms is None else now_ms
        return cleanable_range(log, self.state_of(log).first_dirty, now).dirty_ratio

    def max_dirty_ratio(self) -> float:
        """The highest dirty ratio of any compacted log (a metric)."""
        return max((self.dirty_ratio(log) for log in self.compacted_logs()), default=0.0)

    def compacted_logs(self) -> list[Any]:
        """The logs whose `cleanup.policy` includes compact, by topic and partition."""
        logs = [log for log in self.logs.all_logs() if "compact" in log.config.cleanup_policy]
        return sorted(logs, key=lambda log: (log.topic, log.partition))

    def last_clean_ms(self, log: Any) -> int:
        """When a round on `log` last finished (ms since the epoch), -1 if never."""
        state = self.states.get((log.topic, log.partition))
        return -1 if state is None or state.last_clean_ms is None else state.last_clean_ms

    # -- choosing and cleaning -----------------------------------------------------------------

    def filthiest_round(self, now_ms: int) -> CleaningRound | None:
        """A prepared round for the log most in need of cleaning, None if none is."""
        best: tuple[float, CleaningRound] | None = None
        for log in self.logs.all_logs():
            config = log.config
            if "compact" not in config.cleanup_policy or log.failed is not None:
                continue
            state = self.state_of(log)
            cleaning = prepare_round(log, state.first_dirty, now_ms)
            if cleaning is None:
                continue
            ratio = cleaning.range.dirty_ratio
            overdue = any(
                0 <= s.max_timestamp < now_ms - config.max_compaction_lag_ms
                for group in cleaning.groups
                for s in group
                if s.next_offset > cleaning.range.first_dirty
            )
            if ratio < config.min_cleanable_dirty_ratio and not overdue:
                continue
            if best is None or ratio > best[0]:
                cleaning.throttler = self.throttler
                best = (ratio, cleaning)
        return best[1] if best is not None else None

    def clean_log(
        self, log: Any, now_ms: int | None = None, *, in_child: bool = False
    ) -> CleanerStats | None:
        """Run one whole round on `log` now, blocking: written on this thread, or by a child
        process when `in_child` (tests, tools)."""
        now = wall_clock_ms() if now_ms is None else now_ms
        cleaning = prepare_round(log, self.state_of(log).first_dirty, now)
        if cleaning is None:
            return None
        log.cleaner_busy = True
        try:
            if in_child:
                job = CleaningJob.of(cleaning)
                try:
                    cleaning.stats = run_child_blocking(job)
                    cleaning.cleaned = open_cleaned(job)
                except BaseException:
                    remove_cleaned(job)
                    raise
            else:
                cleaning.write()
        finally:
            log.cleaner_busy = False
        return self.finish(cleaning)

    def finish(self, cleaning: CleaningRound) -> CleanerStats:
        """Swap the round's segments in (event loop), record the round, checkpoint."""
        log = cleaning.log
        swapped = True
        for group, new in zip(cleaning.groups, cleaning.cleaned, strict=True):
            if not swapped or not log.replace_segments(group, new, self._crash_hook()):
                swapped = False
                new.delete()
        state = self.state_of(log)
        if swapped:
            state.first_dirty = cleaning.range.first_uncleanable
        state.last_clean_ms = wall_clock_ms()
        self.last_run_monotonic = time.monotonic()
        stats = cleaning.stats
        for name in vars(stats):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(stats, name))
        self._write_checkpoints()
        logger.info(
            "cleaned %s: offsets %d-%d, %d bytes -> %d, %d record(s) removed%s",
            log.name,
            cleaning.groups[0][0].base_offset,
            cleaning.range.first_uncleanable - 1,
            stats.bytes_read,
            stats.bytes_written,
            stats.records_removed,
            "" if swapped else " (abandoned: the log changed under the round)",
        )
        return stats

    def _crash_hook(self) -> Callable[[str], None] | None:
        target = self._crash_point
        if target is None:
            return None

        def hook(point: str) -> None:
            if point == target:
                crash(f"{CRASH_KEY}={point}")

        return hook

    async def run(self) -> None:
        """The background task: clean the filthiest log, or wait `log.cleaner.backoff.ms`."""
        loop = asyncio.get_running_loop()
        while True:
            cleaning = self.filthiest_round(wall_clock_ms()) if self.enabled else None
            if cleaning is None:
                self.last_run_monotonic = time.monotonic()
                await asyncio.sleep(self.backoff_ms / 1000)
                continue
            log = cleaning.log
            log.cleaner_busy = True
            try:
                if self.in_child:
                    await self._write_in_child(cleaning)
                else:
                    await loop.run_in_executor(None, cleaning.write)
            except CleanerChildFailed as exc:
                logger.error(
                    "cleaning %s failed: %s; the round is abandoned, its .cleaned files "
                    "removed; next try in %d ms",
                    log.name,
                    exc,
                    self.backoff_ms,
                )
                await asyncio.sleep(self.backoff_ms / 1000)
                continue
            except Exception:
                logger.exception("cleaning %s failed; the round is abandoned", log.name)
                cleaning.discard()
                await asyncio.sleep(self.backoff_ms / 1000)
                continue
            finally:
                log.cleaner_busy = False
            self.finish(cleaning)
            await asyncio.sleep(0)

    async def _write_in_child(self, cleaning: CleaningRound) -> None:
        """`cleaning.write` by a child process (`child`); on any failure, cancellation
        included, the round's `.cleaned` files are gone when this returns."""
        job = CleaningJob.of(cleaning, self.child_nice, self.child_sched_idle)
        self.child = CleanerChild(job)
        try:
            cleaning.stats = await self.child.run()
            cleaning.cleaned = open_cleaned(job)
        except BaseException:
            remove_cleaned(job)
            raise
        finally:
            self.child = None
