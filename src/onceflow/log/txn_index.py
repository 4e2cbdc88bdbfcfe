"""Aborted-transaction index: `<20-digit base offset>.txnindex`, one per segment.

Kafka's layout: fixed 34-byte big-endian entries ``version int16 (0), producer_id int64,
first_offset int64, last_offset int64, last_stable_offset int64``. An entry is appended to the
segment holding the ABORT marker when the marker completes a transaction (`last_offset` is the
marker's offset, `last_stable_offset` the partition's LSO right after it). Entries are in
`last_offset` order. The file is created on the first entry; entries are kept in memory too
(aborts are rare) so `collect` reads no file. fsynced with the segment's other indexes.

A file whose size is not a whole number of entries, or holding an entry of another version or
out of order, is cut before the first bad entry on `load` (the log's producer-state replay
re-adds what is missing).
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from onceflow.log.fsutil import fsync_file

TXN_INDEX_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry of the index."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The `.txnindex` file of one segment. Not thread-safe except `flush`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._fd = -1
        self._dirty = False

    def load(self) -> str | None:
        """Read the file if present; returns why its tail was cut, or None when intact."""
        self.entries = []
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        good = 0
        problem = None
        last = -1
        while good + ENTRY_SIZE <= len(data):
            version, *fields = _ENTRY.unpack_from(data, good)
            entry = AbortedTxn(*fields)
            if version != TXN_INDEX_VERSION:
                problem = f"entry of unknown version {version}"
                break
            if entry.last_offset <= last or entry.first_offset > entry.last_offset:
                problem = f"entry out of order at last offset {entry.last_offset}"
                break
            self.entries.append(entry)
            last = entry.last_offset
            good += ENTRY_SIZE
        if problem is None and good != len(data):
            problem = f"{len(data) - good} trailing bytes"
        if problem is not None:
            os.truncate(self.path, good)
        return problem

    @property
    def last_offset(self) -> int:
        """Last offset of the newest entry, -1 when empty."""
        return self.entries[-1].last_offset if self.entries else -1

    def contains(self, producer_id: int, first_offset: int, last_offset: int) -> bool:
        """True when an entry for exactly this aborted transaction exists."""
        return any(
            e.producer_id == producer_id
            and e.first_offset == first_offset
            and e.last_offset == last_offset
            for e in self.entries
        )

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry (no fsync). Raises ValueError when it is not after the last one."""
        if entry.last_offset <= self.last_offset:
            raise ValueError(
                f"aborted txn last offset {entry.last_offset} not after {self.last_offset}"
            )
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, _ENTRY.pack(TXN_INDEX_VERSION, *entry))
        self.entries.append(entry)
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping `[fetch_offset, upper_bound_offset)`, and whether the
        search is complete (an entry's LSO reached the bound: later segments cannot matter).
        Kafka's `TransactionIndex.collectAbortedTxns`."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after `offset`."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        if os.path.exists(self.path):
            os.truncate(self.path, len(keep) * ENTRY_SIZE)
            self._dirty = True

    def reset(self) -> None:
        """Remove every entry (the file is emptied; recovery replay refills it)."""
        self.entries = []
        if os.path.exists(self.path):
            os.truncate(self.path, 0)
            self._dirty = True

    def flush(self) -> None:
        """fsync the file when entries were written since the last flush."""
        if not self._dirty:
            return
        self._dirty = False
        if self._fd >= 0:
            os.fsync(self._fd)
        elif os.path.exists(self.path):
            fsync_file(self.path)

    def close(self) -> None:
        """Close the file's descriptor if open (idempotent); a later `append` opens it again."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
