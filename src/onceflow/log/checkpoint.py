"""Kafka's offset checkpoint files (`recovery-point-offset-checkpoint`,
`cleaner-offset-checkpoint`): `0`, a count, then `topic partition offset` lines."""

from __future__ import annotations

from collections.abc import Iterable

from onceflow.log.fsutil import write_file_atomically


def write_offset_checkpoint(path: str, entries: Iterable[tuple[str, int, int]]) -> None:
    entries = list(entries)
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for t, p, o in entries]
    write_file_atomically(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint format; an unreadable file counts as empty (full recovery)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines[0].strip() != "0":
            return {}
        count = int(lines[1])
        out = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
        return out
    except (FileNotFoundError, ValueError, IndexError):
        return {}
