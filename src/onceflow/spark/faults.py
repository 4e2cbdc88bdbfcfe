"""Fault points of the sink, for crash tests and `onceflow demo` (never set in production).

The sink option `onceflow.faults` lists points as `point@batch[:partition][=action]`, comma
separated, for example `task.midway@2:0=hang,driver.between_commits@4`. When the sink reaches
a listed point in that batch (and task partition), it acts:

- `hang` (the default): write a file named after the point into `onceflow.faults.dir` and
  sleep; the supervisor (a test, the demo) sees the file and SIGKILLs the Spark driver's
  process group, so the crash happens exactly there;
- `raise`: fail the task (Spark retries it when its master allows task retries);
- `exit`: end the Python worker process at once (`os._exit`), as a crashed executor would.

Task points fire on a task's first attempt only, so a retried task goes through. The points:
`task.start`, `task.midway` (after the first Arrow batch was sent), `task.prepared` (records
and progress marker written, transaction left open), `driver.before_commit`,
`driver.between_commits` (in the driver's commit pool, on the way to committing one task
partition's transaction, once the first prepared task's commit has finished: with no partition
every other task's commit stops there, with `:p` only task partition p's while the pool commits
the rest; a batch with one prepared transaction stops after its commit),
`driver.after_commit` (all committed, before Spark records the batch as done).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["FaultInjected", "fault_point", "parse_faults"]

POINTS = frozenset(
    {
        "task.start",
        "task.midway",
        "task.prepared",
        "driver.before_commit",
        "driver.between_commits",
        "driver.after_commit",
    }
)
ACTIONS = frozenset({"hang", "raise", "exit"})


class FaultInjected(RuntimeError):
    """The `raise` action of a fault point."""


def parse_faults(spec: str) -> dict[tuple[str, int, int | None], str]:
    """`point@batch[:partition][=action]`, ... -> {(point, batch, partition): action}."""
    out: dict[tuple[str, int, int | None], str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        where, _, action = item.partition("=")
        point, _, target = where.partition("@")
        batch, _, partition = target.partition(":")
        action = action or "hang"
        if point not in POINTS or action not in ACTIONS or not batch.isdigit():
            raise ValueError(f"bad fault point {item!r}")
        out[(point, int(batch), int(partition) if partition else None)] = action
    return out


def fault_point(
    spec: str,
    faults_dir: str | None,
    point: str,
    batch_id: int,
    partition: int | None = None,
    attempt: int = 0,
) -> None:
    """Act on `point` if the spec lists it for this batch (and partition); else return."""
    if not spec or attempt > 0:
        return
    faults = parse_faults(spec)
    action = faults.get((point, batch_id, partition)) or faults.get((point, batch_id, None))
    if action is None:
        return
    where = f"{point}@{batch_id}" + ("" if partition is None else f":{partition}")
    if action == "raise":
        raise FaultInjected(f"fault point {where}")
    if action == "exit":
        os._exit(17)
    if faults_dir:
        Path(faults_dir).mkdir(parents=True, exist_ok=True)
        tmp = Path(faults_dir) / f".{where}.{os.getpid()}"
        tmp.write_text(str(os.getpid()))
        tmp.rename(Path(faults_dir) / where)  # appears whole: the supervisor reads the pid
    while True:  # hang until killed
        time.sleep(3600)
