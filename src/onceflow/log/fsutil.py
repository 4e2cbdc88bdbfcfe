"""Small crash-safe file helpers: atomic replace, directory fsync, tiny integer files."""

from __future__ import annotations

import os


def fsync_dir(path: str) -> None:
    """fsync a directory so entries created, renamed or removed in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomically(path: str, data: bytes) -> None:
    """Replace `path` with `data`: write a temp file, fsync, rename over, fsync the directory.

    A crash leaves either the old or the new content, never a mix (at worst a stray `.tmp`).
    """
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
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
