"""Sparse segment indexes: `.index` (offset -> position) and `.timeindex` (timestamp -> offset).

Both follow Kafka's on-disk layout (big-endian, fixed-size entries, offsets stored relative to
the segment's base offset):

- `.index`: relative offset int32 + position int32. Entry `(o, p)` says the batch whose last
  offset is `base + o` starts at byte `p` of the `.log` file (Kafka indexes a batch by its last
  offset). An entry is added once at least `index.interval.bytes` of batches were appended
  since the previous one.
- `.timeindex`: timestamp int64 + relative offset int32. Entry `(t, o)` says `t` is the largest
  batch max-timestamp among offsets up to `base + o`, and `base + o` is the last offset of the
  first batch that reached it. Timestamps strictly increase from entry to entry.

The entries are kept in memory as `array`s for `bisect` lookups and appended to the file with
one `pwrite` per append call. Kafka preallocates and memory-maps index files; onceflow appends
instead, so the file size is always `entries * entry_size` and no trimming is needed on close.

A file whose size is not a multiple of the entry size, or whose entries are out of order or
point past the log, fails `sanity_check` and is rebuilt by recovery.

The file is opened lazily, as Kafka's `LazyIndex` maps it on first use: lookups read memory only,
so the descriptor is opened by the first write (append, truncation) and given back by `close`,
which the segment calls once its indexes are fsynced and it is no longer the active segment. A
partition that is only created, or only read, holds no index descriptor; a broker with many
partitions holds one descriptor per segment (its `.log`) instead of three. Changes since the
last fsync are remembered, so `flush` still fsyncs a file whose descriptor was closed.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right

from onceflow.log.fsutil import fsync_file

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12

_LITTLE = sys.byteorder == "little"
_TIME_ENTRY = struct.Struct(">qi")


def _strictly_increasing(column: array[int]) -> bool:
    """True when every element is larger than the one before (compared in C, not per element)."""
    items = column.tolist()
    return items == sorted(set(items))


class _Index:
    """Shared machinery: an open file plus two parallel in-memory columns of entries."""

    entry_size = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._fd = -1  # opened by the first write (`_file`)
        self._dirty = False  # changed since the last fsync
        self._keys: array[int] = array("q")
        self._values: array[int] = array("q")

    # -- state ---------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Number of entries."""
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        """True when no more entries fit within `segment.index.bytes`."""
        return len(self._keys) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        """Bytes the entries occupy on disk."""
        return len(self._keys) * self.entry_size

    @property
    def is_open(self) -> bool:
        """True while the file's descriptor is open (after a write, until `close`)."""
        return self._fd >= 0

    # -- file I/O ------------------------------------------------------------------------------

    def _file(self) -> int:
        """The file's descriptor, opening (and creating) the file on first use."""
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _write(self, encoded: bytes, keys: list[int], values: list[int]) -> None:
        position = self.size_bytes
        view = memoryview(encoded)
        fd = self._file()
        self._dirty = True
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written
        self._keys.extend(keys)
        self._values.extend(values)

    def reset(self) -> None:
        """Drop every entry (file and memory); creates the empty file if it is missing."""
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
        else:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
        self._dirty = True
        self._keys = array("q")
        self._values = array("q")

    def truncate_entries(self, count: int) -> None:
        """Keep only the first `count` entries."""
        if count >= len(self._keys):
            return
        os.ftruncate(self._file(), count * self.entry_size)
        self._dirty = True
        del self._keys[count:]
        del self._values[count:]

    def flush(self) -> None:
        """fsync the index file when it changed since the last flush (opening it by path if
        its descriptor was closed meanwhile)."""
        if not self._dirty:
            return
        if self._fd >= 0:
            os.fsync(self._fd)
        else:
            fsync_file(self.path)
        self._dirty = False

    def close(self) -> None:
        """Close the file's descriptor if open (idempotent); a later write opens it again."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def load(self) -> bool:
        """Read the entries from disk; False (and no entries) if the file is malformed."""
        columns = self._read_columns()
        if columns is None:
            return False
        self._keys, self._values = columns
        return True

    def _read_columns(self) -> tuple[array[int], array[int]] | None:
        """Read the file into two columns (a missing file has none); None when its size is not
        a whole number of entries."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % self.entry_size:
            return None
        return self._decode(data)

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        raise NotImplementedError


class OffsetIndex(_Index):
    """The `.index` file: last offset of a batch -> position of that batch in the log."""

    entry_size = OFFSET_ENTRY_SIZE

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        flat = array("i", data)
        if _LITTLE:
            flat.byteswap()
        return array("q", flat[0::2]), array("q", flat[1::2])

    def append_entries(self, entries: list[tuple[int, int]]) -> None:
        """Append `(absolute offset, position)` pairs in order, with one write."""
        if not entries:
            return
        base = self.base_offset
        flat: list[int] = []
        keys: list[int] = []
        values: list[int] = []
        for offset, position in entries:
            relative = offset - base
            flat.append(relative)
            flat.append(position)
            keys.append(relative)
            values.append(position)
        self._write(struct.pack(f">{len(flat)}i", *flat), keys, values)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= `offset` as `(offset, position)`; `(base, 0)` if none."""
        i = bisect_right(self._keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    def last_entry(self) -> tuple[int, int]:
        """The last entry as `(offset, position)`; `(base, 0)` if the index is empty."""
        if not self._keys:
            return self.base_offset, 0
        return self.base_offset + self._keys[-1], self._values[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past `position` of the log."""
        count = len(self._values)
        while count and self._values[count - 1] >= position:
            count -= 1
        self.truncate_entries(count)

    def sanity_check(self, log_size: int) -> str | None:
        """None if the entries are plausible for a log of `log_size` bytes, else why not."""
        keys, values = self._keys, self._values
        if not (_strictly_increasing(keys) and _strictly_increasing(values)):
            return f"entries of {self.path} are out of order"
        if keys and (keys[0] < 0 or values[0] < 0):
            return f"negative entry in {self.path}"
        if values and values[-1] >= log_size:
            return f"last entry of {self.path} points past the end of the log"
        return None


class TimeIndex(_Index):
    """The `.timeindex` file: max timestamp so far -> last offset of the batch that reached it."""

    entry_size = TIME_ENTRY_SIZE

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        flat = struct.unpack(">" + "qi" * (len(data) // TIME_ENTRY_SIZE), data)
        return array("q", flat[0::2]), array("q", flat[1::2])

    @property
    def last_timestamp(self) -> int:
        """Timestamp of the last entry, -1 if none."""
        return self._keys[-1] if self._keys else -1

    def append_entries(self, entries: list[tuple[int, int]]) -> None:
        """Append `(timestamp, absolute offset)` pairs; each must raise the last timestamp."""
        if not entries:
            return
        base = self.base_offset
        parts = []
        keys: list[int] = []
        values: list[int] = []
        for timestamp, offset in entries:
            parts.append(_TIME_ENTRY.pack(timestamp, offset - base))
            keys.append(timestamp)
            values.append(offset - base)
        self._write(b"".join(parts), keys, values)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= `timestamp` as `(timestamp, offset)`; `(-1, base)`."""
        i = bisect_right(self._keys, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._keys[i], self.base_offset + self._values[i]

    def last_entry(self) -> tuple[int, int]:
        """The last entry as `(timestamp, offset)`; `(-1, base)` if the index is empty."""
        if not self._keys:
            return -1, self.base_offset
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries whose offset is >= `offset`."""
        relative = offset - self.base_offset
        count = len(self._values)
        while count and self._values[count - 1] >= relative:
            count -= 1
        self.truncate_entries(count)

    def sanity_check(self, next_offset: int) -> str | None:
        """None if the entries are ordered and below `next_offset`, else why not."""
        keys, values = self._keys, self._values
        if not (_strictly_increasing(keys) and values.tolist() == sorted(values)):
            return f"entries of {self.path} are out of order"
        if values and (values[0] < 0 or self.base_offset + values[-1] >= next_offset):
            return f"last entry of {self.path} points past the end of the log"
        return None
