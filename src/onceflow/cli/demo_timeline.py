"""What `onceflow demo` observed, in time order: its phases, each driver run with how it ended,
the kill -9 of the broker, and every micro-batch Spark committed.

The demo records the events it causes as they happen (wall-clock seconds); the micro-batches
come from the query's checkpoint, Spark's own record of its progress: `offsets/N` holds batch
N's start (`batchTimestampMs`) and the source offsets it read up to, and `commits/N` is
written when the batch committed (its modification time). `demo_report` draws the result;
`to_json`/`from_json` keep a run so its report can be drawn again.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# event kinds
PHASE = "phase"
DRIVER_START = "driver-start"
DRIVER_END = "driver-end"
DRIVER_KILL = "driver-kill"
BROKER_KILL = "broker-kill"
BROKER_RESTART = "broker-restart"


@dataclass(frozen=True)
class Event:
    at: float  # seconds since the epoch
    kind: str
    text: str


@dataclass(frozen=True)
class Batch:
    """A committed micro-batch: `started` is Spark's batch timestamp, `committed` the time its
    commit log entry was written; `input_offsets` the source offsets it covered (records,
    aborted ones and transaction markers included), by topic-partition."""

    batch_id: int
    started: float
    committed: float
    input_offsets: int
    end_offsets: dict[str, int]


@dataclass
class Timeline:
    """A demo run as it goes: `phase` is what it does now; `summary` the final report's
    figures (`demo_cmd.Report` as a dict) once the check ran."""

    started: float = field(default_factory=time.time)
    phase: str = "starting"
    events: list[Event] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    finished: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, kind: str, text: str) -> None:
        """Record an event now."""
        with self._lock:
            self.events.append(Event(time.time(), kind, text))
            if kind == PHASE:
                self.phase = text

    def set_batches(self, batches: list[Batch]) -> None:
        """Replace the micro-batches with a newer reading of the checkpoint."""
        with self._lock:
            self.batches = batches

    def snapshot(self) -> Timeline:
        """A copy that another thread (the console) may read while the demo goes on."""
        with self._lock:
            return Timeline(
                self.started,
                self.phase,
                list(self.events),
                list(self.batches),
                dict(self.summary),
                self.finished,
            )

    def to_json(self) -> dict[str, Any]:
        """The run as JSON values."""
        data = self.snapshot()
        return {
            "started": data.started,
            "phase": data.phase,
            "finished": data.finished,
            "events": [asdict(e) for e in data.events],
            "batches": [asdict(b) for b in data.batches],
            "summary": data.summary,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Timeline:
        """The run `to_json` gave."""
        return cls(
            data["started"],
            data["phase"],
            [Event(**e) for e in data["events"]],
            [Batch(**b) for b in data["batches"]],
            data["summary"],
            data["finished"],
        )


def read_batches(checkpoint: Path) -> list[Batch]:
    """The committed micro-batches of the query whose checkpoint is `checkpoint`."""
    commits, offsets = checkpoint / "commits", checkpoint / "offsets"
    if not commits.is_dir():
        return []
    out: list[Batch] = []
    previous: dict[str, int] = {}
    for batch_id in sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()):
        try:
            committed = (commits / str(batch_id)).stat().st_mtime
            started, ends = _read_offsets(offsets / str(batch_id))
        except (OSError, ValueError):  # written meanwhile; the next reading has it
            break
        if batch_id > 0 and not previous:
            try:
                previous = _read_offsets(offsets / str(batch_id - 1))[1]
            except (OSError, ValueError):
                previous = {}
        covered = sum(end - previous.get(tp, 0) for tp, end in ends.items())
        out.append(Batch(batch_id, started, committed, covered, ends))
        previous = ends
    return out


def _read_offsets(path: Path) -> tuple[float, dict[str, int]]:
    """(batch start in seconds, {"topic-partition": end offset}) of an `offsets/N` file:
    a version line, the batch metadata, then one line of offsets per source."""
    lines = path.read_text().splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise ValueError(f"{path}: not a Spark offset log entry")
    started = json.loads(lines[1])["batchTimestampMs"] / 1000
    ends: dict[str, int] = {}
    for line in lines[2:]:
        source = json.loads(line)
        for topic, partitions in source.items():
            if topic.startswith("@"):
                continue
            ends.update({f"{topic}-{p}": int(o) for p, o in partitions.items()})
    return started, ends
