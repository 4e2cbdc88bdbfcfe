"""Small crash-safe file helpers: atomic replace, directory fsync, tiny integer files, and
the data directory's lock."""

from __future__ import annotations

import fcntl
import os

LOCK_FILE = ".lock"


class DirectoryLockedError(OSError):
    """Another process holds the data directory's lock."""


class DirectoryLock:
    """An exclusive `flock` on `<directory>/.lock`, held until `release()` (the OS drops it
    when the process dies, kill -9 included). The holder's pid is written into the file so a
    refused second process can name it. Kafka takes the same lock on every log directory."""

    def __init__(self, directory: str):
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, LOCK_FILE)
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(self._fd)
            os.close(self._fd)
            self._fd = None
            who = f" (held by pid {holder})" if holder else ""
            raise DirectoryLockedError(
                f"Failed to acquire lock on file {self.path}{who}: another broker is using "
                f"the data directory {directory}"
            ) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return None


def fsync_dir(path: str) -> None:
    """fsync a directory so entries created, renamed or removed in it are durable."""
    _fsync_path(path, os.O_RDONLY | os.O_DIRECTORY)


def fsync_file(path: str) -> None:
    """fsync a file by path (its changes were written through a descriptor since closed)."""
    _fsync_path(path, os.O_RDONLY)


def _fsync_path(path: str, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(path: str, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data`: write a temp file, fsync, rename over, fsync the directory.

    A crash leaves either the old or the new content, never a mix (at worst a stray `.tmp`).
    The new file gets `mode` (0o600 for secrets): a `.tmp` left by a crash is removed first,
    since reopening it would keep its old mode.
    """
    tmp = path + ".tmp"
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def read_int_file(path: str) -> int | None:
    """The integer stored in a small text file, None if absent or unreadable."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None
