"""Swapping cleaned segments in, crash-safe (Kafka's `.cleaned`/`.swap` scheme, `replaceSegments`).

A round writes each group's new segment beside the old ones as `<base>.log.cleaned` (and
`.index.cleaned`, `.timeindex.cleaned`, `.txnindex.cleaned`), fsynced. The swap then:

1. renames the `.cleaned` files to `.swap`, the `.log` first, and fsyncs the directory: from
   here on the new segment wins;
2. renames each old segment's files to `.deleted`, fsyncs the directory;
3. renames the `.swap` files to their live names, the `.log` last, fsyncs the directory;
4. unlinks the `.deleted` files.

`complete_swaps` runs when a partition directory is opened (before anything else reads it):
`.cleaned` files are dropped (the round is lost, the old segments are intact); a
`<base>.log.swap` means step 1 finished, so every live segment whose base offset lies in
`[base, the swap's next offset)` is removed and the `.swap` files take their live names;
any other `.swap` (of an index, with no `.log.swap`) is dropped (its index is rebuilt);
`.deleted` files are removed. The cleaned segment covers exactly the old segments' offsets (its
group's last batch is always kept), so the range is exact.

TEST-ONLY crash points (`CRASH_POINTS`): the broker key `onceflow.test.crash.cleaner=<point>`
makes the broker exit as kill -9 would right after that step.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Sequence

from onceflow.log.fsutil import fsync_dir
from onceflow.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    parse_segment_stem,
    segment_file_stem,
)

logger = logging.getLogger("onceflow.log.cleaner")

SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
CRASH_KEY = "onceflow.test.crash.cleaner"
AFTER_CLEANED = "after_cleaned"
AFTER_SWAP = "after_swap"
AFTER_DELETED = "after_deleted"
AFTER_LIVE = "after_live"
CRASH_POINTS = (AFTER_CLEANED, AFTER_SWAP, AFTER_DELETED, AFTER_LIVE)
_LIVE_FILES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_BATCH_PREFIX = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")

CrashHook = Callable[[str], None]


def swap_in(
    dir_path: str, old: Sequence[LogSegment], new: LogSegment, crash: CrashHook | None
) -> None:
    """Steps 1-4 for one group; `new` ends with its live names and `old` is deleted."""
    _point(crash, AFTER_CLEANED)
    new.change_file_suffix(SWAP_SUFFIX)
    fsync_dir(dir_path)
    _point(crash, AFTER_SWAP)
    for segment in old:
        segment.close()
        segment.change_file_suffix(DELETED_SUFFIX)
    fsync_dir(dir_path)
    _point(crash, AFTER_DELETED)
    new.change_file_suffix("")
    fsync_dir(dir_path)
    _point(crash, AFTER_LIVE)
    for segment in old:
        segment.delete()


def _point(crash: CrashHook | None, point: str) -> None:
    if crash is not None:
        crash(point)


def complete_swaps(dir_path: str) -> None:
    """Finish or drop what a crash left of a swap in `dir_path` (see the module docstring)."""
    names = os.listdir(dir_path)
    swaps = sorted(
        base
        for name in names
        if name.endswith(LOG_SUFFIX + SWAP_SUFFIX)
        and (base := parse_segment_stem(name)) is not None
    )
    for base in swaps:
        stem = os.path.join(dir_path, segment_file_stem(base))
        end = _next_offset(stem + LOG_SUFFIX + SWAP_SUFFIX, base)
        for name in names:
            other = parse_segment_stem(name)
            if other is not None and base <= other < end and name.endswith(LOG_SUFFIX):
                other_stem = os.path.join(dir_path, segment_file_stem(other))
                for suffix in _LIVE_FILES:
                    _unlink(other_stem + suffix)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LOG_SUFFIX):
            if os.path.exists(stem + suffix + SWAP_SUFFIX):
                os.replace(stem + suffix + SWAP_SUFFIX, stem + suffix)
        logger.warning(
            "completed an interrupted cleaner swap in %s: segment %d replaces offsets %d-%d",
            dir_path,
            base,
            base,
            end - 1,
        )
    for name in os.listdir(dir_path):
        if name.endswith((SWAP_SUFFIX, CLEANED_SUFFIX, DELETED_SUFFIX)):
            _unlink(os.path.join(dir_path, name))
    if swaps:
        fsync_dir(dir_path)


def _next_offset(path: str, base: int) -> int:
    """The offset after the last whole batch of a `.log` file (framing only; recovery checks
    the batches later)."""
    end = base
    with open(path, "rb") as f:
        data = f.read()
    position = 0
    while position + 61 <= len(data):
        batch_base, length = _BATCH_PREFIX.unpack_from(data, position)
        if length <= 0 or position + 12 + length > len(data):
            break
        end = batch_base + _LAST_OFFSET_DELTA.unpack_from(data, position + 23)[0] + 1
        position += 12 + length
    return end


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
