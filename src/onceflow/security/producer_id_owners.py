"""Which principal owns each producer id: `<data dir>/producer-id-owners`, append-only.

onceflow binds a producer id to the principal whose InitProducerId obtained it (a stricter
behaviour than Kafka's, see docs/security.md), so another principal cannot reuse the id and
epoch to write into its transaction or fence it. This module is the durable map; the broker
(`broker.producer_binding`) checks requests against it.

What is stored: an id with no record is owned by `User:ANONYMOUS`, so a record is written only
when an id's owner becomes a principal other than its current one. A broker whose clients are
all unauthenticated (PLAINTEXT only) never writes the file. Ids are never reused (the id block
file), so records never go stale and are kept: one record per id handed to an authenticated
principal, 16 bytes plus the principal's UTF-8 name (about 26 bytes for `User:alice`), and an
entry in memory. A transactional id whose producer id moves to another principal (another
principal allowed to write that transactional id calls InitProducerId) adds a record that
supersedes the earlier one; at open, when superseded records are more than half of the file,
the file is rewritten with one record per id (temp file, fsync, rename).

Record format (big-endian): payload length (uint32), CRC32C of the payload (uint32), payload:
producer id (int64) then the principal in UTF-8 (1 to `MAX_PRINCIPAL_BYTES` bytes). `bind`
writes one record with a single `write` and fsyncs it (and the directory, when it created the
file) before returning: the caller answers InitProducerId only after that.

Reading at open: a crash in the middle of an append leaves a torn last record (short, or its
CRC not matching, or a zero-filled tail). It is dropped, logged, and cut off the file, so the
next append follows the last whole record; the id it was writing was never handed out. Any
other record that cannot be read is `ProducerIdOwnersCorruptError`, a startup error: starting
without the bindings would let any principal use any id.

`bind` blocks on fsync: call it from a worker thread, one call at a time.
"""

from __future__ import annotations

import logging
import os
import struct
from typing import Final

from crc32c import crc32c

from onceflow.log.fsutil import fsync_dir, fsync_file, write_file_atomically
from onceflow.security.acl import ANONYMOUS_PRINCIPAL

__all__ = ["FILE_NAME", "ProducerIdOwners", "ProducerIdOwnersCorruptError"]

FILE_NAME: Final = "producer-id-owners"
MAX_PRINCIPAL_BYTES: Final = 65536
_FRAME = struct.Struct(">II")  # payload length, crc32c
_PRODUCER_ID = struct.Struct(">q")
_MIN_PAYLOAD = _PRODUCER_ID.size + 1
_MAX_PAYLOAD = _PRODUCER_ID.size + MAX_PRINCIPAL_BYTES

log = logging.getLogger("onceflow.security.producer_id_owners")


class ProducerIdOwnersCorruptError(Exception):
    """A record before the end of the file cannot be read; the broker must not start."""


def encode_record(producer_id: int, principal: str) -> bytes:
    """One record: frame and payload."""
    payload = _PRODUCER_ID.pack(producer_id) + principal.encode("utf-8")
    if not _MIN_PAYLOAD <= len(payload) <= _MAX_PAYLOAD:
        raise ValueError(f"principal of {len(payload) - _PRODUCER_ID.size} bytes")
    return _FRAME.pack(len(payload), crc32c(payload)) + payload


def _decode(data: bytes, path: str) -> tuple[list[tuple[int, str]], int]:
    """The records of `data` and the length of the readable part (shorter than `data` when a
    torn last record was dropped)."""
    records: list[tuple[int, str]] = []
    pos, end = 0, len(data)
    while pos < end:
        record = _read_record(data, pos)
        if record is None:
            if _is_torn_tail(data, pos):
                return records, pos
            raise ProducerIdOwnersCorruptError(
                f"{path}: unreadable record at byte {pos} of {end}; refusing to start without "
                f"the producer id owners (restore the file, or remove it to drop every binding)"
            )
        producer_id, principal, pos = record
        records.append((producer_id, principal))
    return records, pos


def _read_record(data: bytes, pos: int) -> tuple[int, str, int] | None:
    """(producer id, principal, position after the record), or None when unreadable."""
    if pos + _FRAME.size > len(data):
        return None
    length, crc = _FRAME.unpack_from(data, pos)
    start = pos + _FRAME.size
    if not _MIN_PAYLOAD <= length <= _MAX_PAYLOAD or start + length > len(data):
        return None
    payload = data[start : start + length]
    if crc32c(payload) != crc:
        return None
    try:
        principal = payload[_PRODUCER_ID.size :].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _PRODUCER_ID.unpack_from(payload)[0], principal, start + length


def _is_torn_tail(data: bytes, pos: int) -> bool:
    """Could the unreadable record at `pos` be the last one, cut short by a crash? Yes when
    the rest is shorter than a frame, all zeros, or exactly as long as the record's own length
    says (or shorter)."""
    rest = len(data) - pos
    if rest < _FRAME.size or not any(data[pos:]):
        return True
    length: int = _FRAME.unpack_from(data, pos)[0]
    return _MIN_PAYLOAD <= length <= _MAX_PAYLOAD and _FRAME.size + length >= rest


class ProducerIdOwners:
    """The owner of every producer id; `owner` is a dict lookup."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, FILE_NAME)
        self._owners: dict[int, str] = {}
        self.torn_bytes = 0  # dropped from the end at open
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return
        records, valid = _decode(data, self.path)
        for producer_id, principal in records:
            self._owners[producer_id] = principal
        if valid < len(data):
            self.torn_bytes = len(data) - valid
            log.warning(
                "%s: dropped a torn last record (%d bytes) left by a crash",
                self.path,
                self.torn_bytes,
            )
            os.truncate(self.path, valid)
            fsync_file(self.path)
        if len(records) - len(self._owners) > len(records) // 2:
            self._rewrite()

    def __len__(self) -> int:
        return len(self._owners)

    def owner(self, producer_id: int) -> str:
        """The principal that obtained `producer_id` (`User:ANONYMOUS` when none is stored)."""
        return self._owners.get(producer_id, ANONYMOUS_PRINCIPAL)

    def needs_record(self, producer_id: int, principal: str) -> bool:
        """Would binding `producer_id` to `principal` change anything?"""
        return self.owner(producer_id) != principal

    def bind(self, producer_id: int, principal: str) -> None:
        """Make `principal` the owner of `producer_id`, durably (blocking: write and fsync).
        Raises OSError when the record cannot be written; the owner is then unchanged."""
        if not self.needs_record(producer_id, principal):
            return
        record = encode_record(producer_id, principal)
        created = not os.path.exists(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                written = os.write(fd, record)
                if written != len(record):
                    raise OSError(f"short write to {self.path} ({written} of {len(record)} bytes)")
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)  # no partial record for the next append to follow
                raise
        finally:
            os.close(fd)
        if created:
            fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        self._owners[producer_id] = principal

    def _rewrite(self) -> None:
        data = b"".join(encode_record(pid, owner) for pid, owner in self._owners.items())
        write_file_atomically(self.path, data)
        log.info("%s: compacted to %d record(s)", self.path, len(self._owners))
