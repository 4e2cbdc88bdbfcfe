"""CPU seconds of a process tree by role, from /proc (Linux), for benchmarks that want to say
where a run's time went: the onceflow broker, Spark's JVM, Spark's Python workers (the
connectors' read and write code runs there) and the driver's own Python.

A process counts its own time and that of its children it has waited for (utime, stime,
cutime, cstime), so workers that exited between two snapshots are still counted, in their
parent's figure. Kafka nodes run as `java` processes too: they are told apart from Spark's
JVM by their main class.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROLES", "cpu_by_role", "cpu_delta"]

ROLES = ("broker", "kafka", "spark_jvm", "python_workers", "driver")
_TICKS = os.sysconf("SC_CLK_TCK")


def _role(pid: int, cmdline: str, root: int) -> str | None:
    if pid == root:
        return "driver"
    if cmdline.split(" ", 1)[0].endswith("java"):
        return "kafka" if "kafka.Kafka" in cmdline else "spark_jvm"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "python_workers"
    if "onceflow broker" in cmdline:
        return "broker"
    return None


def _processes() -> dict[int, tuple[int, float, str]]:
    """pid -> (parent pid, CPU seconds with waited children, command line)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        out[int(entry.name)] = (int(fields[1]), ticks / _TICKS, cmdline.strip())
    return out


def cpu_by_role(root: int | None = None) -> dict[str, float]:
    """CPU seconds so far of `root` (default: this process) and its descendants, by role."""
    root = os.getpid() if root is None else root
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    totals = dict.fromkeys(ROLES, 0.0)
    stack = [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        if pid not in procs:
            continue
        role = _role(pid, procs[pid][2], root)
        if role is not None:
            totals[role] += procs[pid][1]
    return totals


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds spent between two `cpu_by_role` snapshots, by role."""
    return {role: round(after[role] - before[role], 2) for role in ROLES}
