"""One log segment: `<20-digit base offset>.log` plus its `.index` and `.timeindex`.

The `.log` file holds v2 record batches verbatim, back to back. Appends are one `pwrite` of a
whole record set (no fsync here: durability is `log.durability`'s job); reads are `pread`s of
contiguous byte ranges. Only batch headers are ever parsed (`records.batch.parse_header`).

Files sharing the base-offset stem are deleted with the segment: `.txnindex` (aborted
transactions, `log.txn_index`, owned by the segment) and `.snapshot` (producer state taken when
the segment was rolled in, `log.producer_snapshot`).

Descriptors: the `.log` stays open for the segment's life (every read and append uses it);
the three index files are read into memory and opened only to be written (`log.index`), and
`release_index_files` closes them once a segment is rolled and fsynced. An idle or read-only
partition therefore holds one descriptor per segment, as Kafka does with its lazily mapped
indexes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from onceflow.common import wall_clock_ms
from onceflow.log.config import MAX_INT32, LogConfig
from onceflow.log.index import OffsetIndex, TimeIndex
from onceflow.log.txn_index import TransactionIndex
from onceflow.records.batch import HEADER_SIZE, MAGIC, MIN_BATCH_LENGTH, BatchHeader, parse_header
from onceflow.records.errors import CorruptRecordError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)

# window for header scans: covers index.interval.bytes of small batches in one pread
SCAN_WINDOW = 16 * 1024


def segment_file_stem(base_offset: int) -> str:
    """Kafka's file name stem: the base offset as 20 zero-padded digits."""
    return f"{base_offset:020d}"


def parse_segment_stem(name: str) -> int | None:
    """Base offset from a file name like `00000000000000000042.log`, or None."""
    stem, dot, _ = name.partition(".")
    if dot and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class BatchInfo:
    """What a segment needs to index one appended batch (computed once by the partition log)."""

    __slots__ = ("last_offset", "max_timestamp", "size")

    def __init__(self, last_offset: int, max_timestamp: int, size: int) -> None:
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.size = size


class LogSegment:
    """A segment's files and in-memory state. Not thread-safe except `flush`."""

    def __init__(
        self,
        dir_path: str,
        base_offset: int,
        config: LogConfig,
        *,
        create: bool,
        file_suffix: str = "",
    ) -> None:
        self.dir_path = dir_path
        self.base_offset = base_offset
        self.config = config
        # "" for a live segment; ".cleaned" or ".swap" while the cleaner replaces segments
        self.file_suffix = file_suffix
        stem = os.path.join(dir_path, segment_file_stem(base_offset))
        self.log_path = stem + LOG_SUFFIX + file_suffix
        flags = os.O_RDWR | os.O_CREAT
        if create:
            flags |= os.O_TRUNC
        self._fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(
            stem + INDEX_SUFFIX + file_suffix, base_offset, config.segment_index_bytes
        )
        self.time_index = TimeIndex(
            stem + TIME_INDEX_SUFFIX + file_suffix, base_offset, config.segment_index_bytes
        )
        self.txn_index = TransactionIndex(stem + TXN_INDEX_SUFFIX + file_suffix)
        if create:
            try:
                self.offset_index.reset()
                self.time_index.reset()
                self.txn_index.reset()
            except OSError:  # e.g. out of descriptors: do not leak the .log's
                self.close()
                raise
        # the offset after the last batch; set by the partition log on load or recovery
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        self.created_ms = wall_clock_ms()

    # -- paths and lifecycle -------------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The `.log` file descriptor."""
        return self._fd

    @property
    def closed(self) -> bool:
        """True once `close` ran."""
        return self._fd < 0

    def file_paths(self) -> list[str]:
        """Every file of this segment that may exist."""
        stem = os.path.join(self.dir_path, segment_file_stem(self.base_offset))
        if self.file_suffix:  # a cleaner's segment: no snapshot of its own
            return [stem + s + self.file_suffix for s in SEGMENT_SUFFIXES if s != SNAPSHOT_SUFFIX]
        return [stem + suffix for suffix in SEGMENT_SUFFIXES]

    def change_file_suffix(self, suffix: str) -> None:
        """Rename the `.log` (first) and the index files that exist to end in `suffix` ("" for
        the live names); open descriptors follow the rename. No fsync of the directory."""
        files = [self, self.offset_index, self.time_index, self.txn_index]
        for owner in files:
            attr = "log_path" if owner is self else "path"
            old = getattr(owner, attr)
            new = old[: len(old) - len(self.file_suffix)] + suffix
            if os.path.exists(old):
                os.replace(old, new)
            setattr(owner, attr, new)
        self.file_suffix = suffix

    def last_modified_ms(self) -> int:
        """mtime of the `.log` file in milliseconds."""
        return int(os.stat(self.log_path).st_mtime * 1000)

    def flush(self, *, indexes: bool) -> None:
        """fdatasync the log file, and fsync the index files when `indexes`."""
        if self._fd < 0:
            return
        os.fdatasync(self._fd)
        if indexes:
            self.offset_index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def release_index_files(self) -> None:
        """Close the index files' descriptors (their entries stay in memory; a later write
        opens a file again and `flush` still fsyncs what changed). Only for a segment that
        no other thread writes or flushes meanwhile."""
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def close(self) -> None:
        """Close every file (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.release_index_files()

    def delete(self) -> None:
        """Close and unlink the files, the `.log` first (an orphan index is cleaned up on load)."""
        self.close()
        for path in self.file_paths():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    # -- append --------------------------------------------------------------------------------

    def should_roll(
        self, records_size: int, max_offset: int, max_timestamp: int, now_ms: int
    ) -> bool:
        """Kafka's roll conditions for appending `records_size` bytes up to `max_offset`.

        As in Kafka, `segment.ms` compares the incoming max timestamp with the segment's first
        batch timestamp, falling back to wall-clock time since creation when either is unset.
        """
        if self.size == 0:
            return False
        if self.size + records_size > self.config.segment_bytes:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if max_offset - self.base_offset > MAX_INT32:
            return True
        basis = self.rolling_based_timestamp
        if basis is not None and basis >= 0 and max_timestamp >= 0:
            return max_timestamp - basis > self.config.segment_ms
        return now_ms - self.created_ms > self.config.segment_ms

    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchInfo]) -> None:
        """Write a whole record set at the end of the file and index its batches.

        On a write error the file is cut back to its previous size, so no part of the record
        set remains, and the error propagates.
        """
        start = self.size
        view = memoryview(data)
        position = start
        try:
            while view:
                written = os.pwrite(self._fd, view, position)
                view = view[written:]
                position += written
        except OSError:
            os.ftruncate(self._fd, start)
            raise
        self.size = position
        self._index_batches(start, batches)

    def _index_batches(self, start: int, batches: list[BatchInfo]) -> None:
        """Kafka's `LogSegment.append` indexing rule, per batch, with one write per index."""
        interval = self.config.index_interval_bytes
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        last_time = self.time_index.last_timestamp
        position = start
        pending = self.bytes_since_last_index_entry
        max_ts = self.max_timestamp
        offset_of_max = self.offset_of_max_timestamp
        for batch in batches:
            if batch.max_timestamp > max_ts:
                max_ts = batch.max_timestamp
                offset_of_max = batch.last_offset
            if pending > interval:
                offset_entries.append((batch.last_offset, position))
                if max_ts > last_time:
                    time_entries.append((max_ts, offset_of_max))
                    last_time = max_ts
                pending = 0
            position += batch.size
            pending += batch.size
        if self.rolling_based_timestamp is None and batches and batches[0].max_timestamp >= 0:
            self.rolling_based_timestamp = batches[0].max_timestamp
        self.bytes_since_last_index_entry = pending
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = offset_of_max
        self.next_offset = batches[-1].last_offset + 1 if batches else self.next_offset
        self.offset_index.append_entries(offset_entries)
        self.time_index.append_entries(time_entries)

    def seal_time_index(self) -> None:
        """Record the segment's max timestamp in the time index (on roll and clean close)."""
        if self.max_timestamp > self.time_index.last_timestamp:
            self.time_index.append_entries([(self.max_timestamp, self.offset_of_max_timestamp)])

    # -- read ----------------------------------------------------------------------------------

    def iter_headers(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """Yield `(position, header)` of each batch from `position` to the end of the file.

        Reads `SCAN_WINDOW` bytes at a time and parses only headers; stops at a batch whose
        header is cut off by the end of the file.
        """
        size = self.size
        window_start = position
        window = b""
        while position + HEADER_SIZE <= size:
            rel = position - window_start
            if rel < 0 or rel + HEADER_SIZE > len(window):
                window_start = position
                window = os.pread(self._fd, min(SCAN_WINDOW, size - position), position)
                rel = 0
                if len(window) < HEADER_SIZE:
                    return
            header = parse_header(window, rel)
            self.check_header(header, position)
            yield position, header
            position += header.total_size

    def check_header(self, header: BatchHeader, position: int) -> None:
        """Raise CorruptRecordError unless `header`, read at `position`, frames a v2 batch that
        lies wholly in the file at or above the segment's base offset (no CRC: reads never
        check it, as Kafka's do not; recovery does)."""
        problem = None
        if header.magic != MAGIC:
            problem = f"magic {header.magic}"
        elif header.batch_length < MIN_BATCH_LENGTH:
            problem = f"batch length {header.batch_length}"
        elif position + header.total_size > self.size:
            problem = f"batch of {header.total_size} bytes runs past the end ({self.size})"
        elif header.base_offset < self.base_offset or header.last_offset_delta < 0:
            problem = f"offsets {header.base_offset}+{header.last_offset_delta}"
        if problem is not None:
            raise CorruptRecordError(
                f"corrupt batch at position {position} of {self.log_path}: {problem}"
            )

    def indexed_position(self, offset: int) -> int:
        """Where a scan for `offset` starts: the offset index's entry when a batch ending at
        that entry's offset starts there, else 0 (an entry off a batch boundary is ignored)."""
        key, position = self.offset_index.lookup(offset)
        if position == 0:
            return 0
        try:
            header = parse_header(os.pread(self._fd, HEADER_SIZE, position))
            self.check_header(header, position)
        except CorruptRecordError:
            return 0
        return position if header.base_offset + header.last_offset_delta == key else 0

    def last_batch_position(self) -> int:
        """Position of the last batch (0 for an empty segment); scans from the last index
        entry. Raises CorruptRecordError when a header on the way is corrupt."""
        last = 0
        for position, _ in self.iter_headers(self.indexed_position(self.next_offset)):
            last = position
        return last

    def translate_offset(self, offset: int, start_position: int = 0) -> int | None:
        """Position of the first batch whose last offset is >= `offset`, or None."""
        position = self.indexed_position(offset)
        for batch_position, header in self.iter_headers(max(position, start_position)):
            if header.base_offset + header.last_offset_delta >= offset:
                return batch_position
        return None

    def read(
        self, position: int, max_bytes: int, upper_bound_offset: int, min_one: bool
    ) -> memoryview:
        """Whole batches from `position`: up to `max_bytes`, stopping before any batch whose base
        offset is >= `upper_bound_offset`; the first batch whole even if larger when `min_one`.

        Returns a `memoryview` over one `pread`; stops before a corrupt header, and raises
        CorruptRecordError when the first one is.
        """
        available = self.size - position
        if available <= 0:
            return memoryview(b"")
        buf = os.pread(self._fd, min(max(max_bytes, HEADER_SIZE), available), position)
        end = 0
        length = len(buf)
        while end + HEADER_SIZE <= length:
            header = parse_header(buf, end)
            try:
                self.check_header(header, position + end)
            except CorruptRecordError:
                if end == 0:
                    raise
                break  # the batches before it are answered; the next read meets it first
            if header.base_offset >= upper_bound_offset:
                break
            if end + header.total_size > length:
                if end == 0 and min_one and header.total_size <= available:
                    buf = os.pread(self._fd, header.total_size, position)
                    end = len(buf)
                break
            if end + header.total_size > max_bytes and not (end == 0 and min_one):
                break
            end += header.total_size
        return memoryview(buf)[:end]

    def read_at(self, position: int, size: int) -> bytes:
        """Raw bytes `[position, position + size)` of the log file."""
        return os.pread(self._fd, size, position)

    # -- truncation ----------------------------------------------------------------------------

    def load_state(self, *, full_scan: bool = False) -> None:
        """Derive next offset, max timestamp and roll basis of a loaded segment.

        The max timestamp comes from the last time-index entry (sealed on roll and clean
        close), the next offset from a scan starting at the last offset-index entry, so only a
        few index intervals are read. `full_scan` reads every header instead (after truncation).
        """
        max_ts, offset_of_max = self.time_index.last_entry()
        start = 0 if full_scan else self.offset_index.last_entry()[1]
        if full_scan:
            max_ts, offset_of_max = -1, self.base_offset
        next_offset = self.base_offset
        for _, header in self.iter_headers(start):
            if header.max_timestamp > max_ts:
                max_ts = header.max_timestamp
                offset_of_max = header.base_offset + header.last_offset_delta
            next_offset = header.base_offset + header.last_offset_delta + 1
        self.next_offset = next_offset
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = offset_of_max
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None
        for _, header in self.iter_headers(0):
            if header.max_timestamp >= 0:
                self.rolling_based_timestamp = header.max_timestamp
            break

    def truncate_to_position(self, position: int) -> None:
        """Cut the log at `position` (a batch boundary), drop index entries past it, reload."""
        if position < self.size:
            os.ftruncate(self._fd, position)
            self.size = position
        self.offset_index.truncate_to_position(position)
        next_offset = self.base_offset
        for _, header in self.iter_headers(self.offset_index.last_entry()[1]):
            next_offset = header.base_offset + header.last_offset_delta + 1
        self.time_index.truncate_to_offset(next_offset)
        self.txn_index.truncate_to(next_offset)
        self.load_state(full_scan=True)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path!r}, size={self.size}, next_offset={self.next_offset})"
