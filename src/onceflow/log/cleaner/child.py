"""The CPU-heavy part of a cleaning round in a child process (`onceflow.log.cleaner.process`).

In one Python process the cleaner's key scan holds the interpreter lock and takes produce
throughput with it (bench/README.md, "Key-only cleaning"). So, by default, a round's offset
map and its `.cleaned` segments are built by `python -m onceflow.log.cleaner.child`, niced by
`onceflow.log.cleaner.process.nice` (default 10), while the broker keeps the rest:
`prepare_round` before, the swap (`PartitionLog.replace_segments`) after, on its event loop.
The crash-safety scheme is unchanged (`cleaner.swap`): the child only ever writes `.cleaned`
files.

The child gets plain data (`CleaningJob`: the log directory, its `LogConfig`, the groups'
offsets, the aborted transactions, the producers' window offsets, the transaction index
entries of the groups' segments, which may not be on disk yet) pickled on its stdin, and
answers the round's `CleanerStats` pickled on its stdout; the broker then opens the
`.cleaned` segments it wrote (`open_cleaned`). The child dies with the broker (PDEATHSIG,
`onceflow.process.child_options`), so no orphan writes `.cleaned` files after a restart.

A child that fails or dies (kill -9, OOM) raises `CleanerChildFailed`; the broker removes the
round's `.cleaned` files (`remove_cleaned`), logs one line and tries again after
`log.cleaner.backoff.ms`. A `.cleaned` file that outlives even that is dropped at the next
start (`swap.complete_swaps`).
"""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass

from onceflow.log.cleaner.cleaner import CLEANED_SUFFIX, CleanableRange, CleanerStats, CleaningRound
from onceflow.log.cleaner.throttler import Throttler
from onceflow.log.config import LogConfig
from onceflow.log.segment import (
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SNAPSHOT_SUFFIX,
    LogSegment,
    segment_file_stem,
)
from onceflow.log.txn_index import AbortedTxn
from onceflow.process import child_options

DEFAULT_NICE = 10  # added to the broker's niceness: the child yields the cores to produce


class CleanerChildFailed(Exception):
    """The child process of a round ended without answering (its exit status says why)."""

    def __init__(self, returncode: int) -> None:
        self.returncode = returncode
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
        super().__init__(f"the cleaner's child process failed ({how})")


@dataclass(frozen=True)
class SegmentRef:
    """What the child needs of one segment of a group: where it starts and ends, and its
    aborted-transaction entries (kept in memory by the broker, `log.txn_index`)."""

    base_offset: int
    next_offset: int
    txn_entries: tuple[AbortedTxn, ...]


@dataclass(frozen=True)
class CleaningJob:
    """A prepared round as plain, picklable data."""

    dir_path: str
    config: LogConfig
    range: CleanableRange
    groups: tuple[tuple[SegmentRef, ...], ...]
    aborted: tuple[tuple[int, int], ...]
    window_offsets: frozenset[tuple[int, int]]
    now_ms: int
    max_bytes_per_second: float
    nice: int = DEFAULT_NICE
    sched_idle: bool = True

    @classmethod
    def of(
        cls, cleaning: CleaningRound, nice: int = DEFAULT_NICE, sched_idle: bool = True
    ) -> CleaningJob:
        """The job of `cleaning` (on the event loop, like `prepare_round`)."""
        log = cleaning.log
        groups = tuple(
            tuple(
                SegmentRef(s.base_offset, s.next_offset, tuple(s.txn_index.entries)) for s in group
            )
            for group in cleaning.groups
        )
        return cls(
            log.dir_path,
            log.config,
            cleaning.range,
            groups,
            tuple(cleaning.aborted),
            cleaning.window_offsets,
            cleaning.now_ms,
            cleaning.throttler.limit,
            nice,
            sched_idle,
        )


def write_job(job: CleaningJob) -> CleanerStats:
    """Build the offset map and write the `.cleaned` segments of `job` (in the child); the
    segments are closed afterwards."""
    groups: list[list[LogSegment]] = []
    try:
        for refs in job.groups:
            group: list[LogSegment] = []
            groups.append(group)
            for ref in refs:
                stem = os.path.join(job.dir_path, segment_file_stem(ref.base_offset))
                if not os.path.exists(stem + LOG_SUFFIX):  # opening would create it
                    raise FileNotFoundError(f"{stem + LOG_SUFFIX} is gone (the log was deleted?)")
                segment = LogSegment(job.dir_path, ref.base_offset, job.config, create=False)
                group.append(segment)
                segment.next_offset = ref.next_offset
                segment.txn_index.entries = list(ref.txn_entries)
        cleaning = CleaningRound(
            None,
            job.range,
            groups,
            list(job.aborted),
            job.window_offsets,
            job.now_ms,
            throttler=Throttler(job.max_bytes_per_second),
        )
        try:
            cleaning.write_to(job.dir_path, job.config)
        finally:
            for segment in cleaning.cleaned:
                segment.close()
        return cleaning.stats
    finally:
        for segment in (s for g in groups for s in g):
            segment.close()


def cleaned_paths(job: CleaningJob) -> list[str]:
    """Every `.cleaned` file the job may write."""
    stems = [os.path.join(job.dir_path, segment_file_stem(g[0].base_offset)) for g in job.groups]
    suffixes = [s for s in SEGMENT_SUFFIXES if s != SNAPSHOT_SUFFIX]
    return [stem + suffix + CLEANED_SUFFIX for stem in stems for suffix in suffixes]


def remove_cleaned(job: CleaningJob) -> None:
    """Unlink the `.cleaned` files of an abandoned job (the child is gone)."""
    for path in cleaned_paths(job):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def open_cleaned(job: CleaningJob) -> list[LogSegment]:
    """The `.cleaned` segments the child wrote, loaded as recovery loads a segment."""
    segments: list[LogSegment] = []
    try:
        for refs in job.groups:
            segment = LogSegment(
                job.dir_path,
                refs[0].base_offset,
                job.config,
                create=False,
                file_suffix=CLEANED_SUFFIX,
            )
            segments.append(segment)
            if not (segment.offset_index.load() and segment.time_index.load()):
                raise OSError(f"{segment.log_path}: the child wrote a torn index")
            problem = segment.txn_index.load()
            if problem is not None:
                raise OSError(f"{segment.log_path}: {problem}")
            segment.load_state()
            if segment.next_offset != refs[-1].next_offset:
                raise OSError(
                    f"{segment.log_path} ends at {segment.next_offset}, not {refs[-1].next_offset}"
                )
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments


def _command() -> tuple[list[str], dict[str, str]]:
    """The child's command line and environment (it imports this very onceflow)."""
    env = dict(os.environ)
    # <root>/onceflow/log/cleaner/child.py
    root = os.path.abspath(__file__)
    for _ in range(4):
        root = os.path.dirname(root)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return [sys.executable, "-m", "onceflow.log.cleaner.child"], env


def _answer(returncode: int, out: bytes) -> CleanerStats:
    if returncode != 0 or not out:
        raise CleanerChildFailed(returncode)
    stats = pickle.loads(out)
    if not isinstance(stats, CleanerStats):
        raise CleanerChildFailed(returncode)
    return stats


class CleanerChild:
    """One round's child process, run from the event loop; `pid` while it runs."""

    def __init__(self, job: CleaningJob) -> None:
        self.job = job
        self.pid: int | None = None

    async def run(self) -> CleanerStats:
        """Start the child, feed it the job, wait for its stats. Cancelled: the child is
        killed first. Raises `CleanerChildFailed`."""
        argv, env = _command()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            **child_options(),
        )
        self.pid = proc.pid
        try:
            out, _ = await proc.communicate(pickle.dumps(self.job))
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await asyncio.shield(proc.wait())
            raise
        finally:
            self.pid = None
        return _answer(proc.returncode if proc.returncode is not None else -1, out)


def run_child_blocking(job: CleaningJob) -> CleanerStats:
    """`CleanerChild.run` for callers without an event loop (tests, tools)."""
    argv, env = _command()
    done = subprocess.run(
        argv,
        input=pickle.dumps(job),
        stdout=subprocess.PIPE,
        env=env,
        check=False,
        **child_options(),
    )
    return _answer(done.returncode, done.stdout)


def lower_priority(job: CleaningJob) -> None:
    """Nice the child by `job.nice` and, with `job.sched_idle` where Linux offers it, move it
    to the SCHED_IDLE policy: a waking broker thread then takes its CPU at once, where a niced
    process still holds the CPU for up to a scheduler slice (bench/README.md, "paired
    slices": a niced child cost produce 30-40%). Refused (a seccomp filter, not Linux): the
    child stays niced only."""
    os.nice(job.nice)
    if job.sched_idle and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass


def main() -> None:
    """The child: a job on stdin, its stats on stdout."""
    job = pickle.loads(sys.stdin.buffer.read())
    if not isinstance(job, CleaningJob):
        raise SystemExit("onceflow.log.cleaner.child: expected a CleaningJob on stdin")
    lower_priority(job)
    stats = write_job(job)
    sys.stdout.buffer.write(pickle.dumps(stats))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    # run under the module's own name, so the job unpickles as its CleaningJob
    from onceflow.log.cleaner.child import main as child_main

    child_main()
