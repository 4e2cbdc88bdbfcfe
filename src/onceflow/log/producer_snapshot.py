"""Producer-state snapshots: `<20-digit offset>.snapshot` files in the partition directory.

A snapshot holds every producer entry as of `offset` (the log end offset when it was taken:
every batch below `offset` is reflected). Taken on segment roll (named after the new segment's
base offset) and on clean shutdown; on open the newest valid snapshot is loaded and the log is
replayed from its offset. Written atomically (temp file, fsync, rename, directory fsync).

onceflow's own format (Kafka's is a different, schema-based layout that keeps only the last
batch per producer; ours keeps the whole 5-batch window, so duplicates are still detected
after a restart). Big-endian::

    version   int16   = 1
    crc       uint32  CRC32C of every byte after this field
    offset    int64   snapshot offset
    count     int32   number of entries, then per entry:
      producer_id int64, producer_epoch int16, coordinator_epoch int32, last_timestamp int64,
      current_txn_first_offset int64 (-1: no open transaction), batch count int8 (0..5), then
      per batch: first_seq int32, last_seq int32, last_offset int64, offset_delta int32,
      timestamp int64

A file that is short, has trailing bytes, another version, a CRC mismatch or a different offset
than its name is corrupt (`CorruptSnapshotError`).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable

from crc32c import crc32c

from onceflow.log.fsutil import write_file_atomically
from onceflow.log.producer_state import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
)
from onceflow.log.segment import SNAPSHOT_SUFFIX

SNAPSHOT_VERSION = 1

_PREFIX = struct.Struct(">hI")
_BODY_HEAD = struct.Struct(">qi")
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqiq")


class CorruptSnapshotError(Exception):
    """A snapshot file that cannot be trusted."""


def snapshot_path(dir_path: str, offset: int) -> str:
    """`<dir>/<20-digit offset>.snapshot`."""
    return os.path.join(dir_path, f"{offset:020d}{SNAPSHOT_SUFFIX}")


def encode_snapshot(offset: int, entries: Iterable[ProducerStateEntry]) -> bytes:
    """Serialize `entries` as of `offset`."""
    entries = list(entries)
    body = bytearray(_BODY_HEAD.pack(offset, len(entries)))
    for entry in entries:
        txn = entry.current_txn_first_offset
        body += _ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.last_timestamp,
            -1 if txn is None else txn,
            len(entry.batches),
        )
        for batch in entry.batches:
            body += _BATCH.pack(*batch)
    return _PREFIX.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> tuple[int, list[ProducerStateEntry]]:
    """`(offset, entries)` of a snapshot; raises CorruptSnapshotError."""
    if len(data) < _PREFIX.size + _BODY_HEAD.size:
        raise CorruptSnapshotError(f"snapshot too short ({len(data)} bytes)")
    version, crc = _PREFIX.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    body = memoryview(data)[_PREFIX.size :]
    if crc32c(body) != crc:
        raise CorruptSnapshotError("snapshot CRC mismatch")
    try:
        offset, count = _BODY_HEAD.unpack_from(body)
        pos = _BODY_HEAD.size
        entries = []
        for _ in range(count):
            pid, epoch, coord, last_ts, txn, nbatches = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
            if not 0 <= nbatches <= NUM_BATCHES_TO_RETAIN:
                raise CorruptSnapshotError(f"producer {pid} has {nbatches} batches")
            batches = []
            for _ in range(nbatches):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(
                ProducerStateEntry(pid, epoch, coord, last_ts, None if txn < 0 else txn, batches)
            )
    except struct.error as exc:
        raise CorruptSnapshotError(f"snapshot truncated: {exc}") from None
    if pos != len(body):
        raise CorruptSnapshotError(f"{len(body) - pos} trailing bytes in snapshot")
    return offset, entries


def write_snapshot(dir_path: str, offset: int, entries: Iterable[ProducerStateEntry]) -> str:
    """Write `<offset>.snapshot` atomically and durably; returns its path."""
    path = snapshot_path(dir_path, offset)
    write_file_atomically(path, encode_snapshot(offset, entries))
    return path


def read_snapshot(dir_path: str, offset: int) -> list[ProducerStateEntry]:
    """Entries of `<offset>.snapshot`; raises CorruptSnapshotError (also for a name/offset
    mismatch) or OSError."""
    with open(snapshot_path(dir_path, offset), "rb") as f:
        data = f.read()
    stored, entries = decode_snapshot(data)
    if stored != offset:
        raise CorruptSnapshotError(f"snapshot named {offset} holds offset {stored}")
    return entries


def list_snapshot_offsets(dir_path: str) -> list[int]:
    """Offsets of the snapshot files in the directory, ascending."""
    offsets = []
    for name in os.listdir(dir_path):
        stem, _, suffix = name.partition(".")
        if "." + suffix == SNAPSHOT_SUFFIX and len(stem) == 20 and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


def delete_snapshot(dir_path: str, offset: int) -> None:
    """Remove `<offset>.snapshot` if present."""
    try:
        os.unlink(snapshot_path(dir_path, offset))
    except FileNotFoundError:
        pass
