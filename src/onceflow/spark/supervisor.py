"""Run a Spark driver as a child process and crash it at a sink fault point.

`DriverProcess` starts `python -m onceflow.spark.pipeline ...` in a new session (its own
process group: the Python driver and the JVM it launches). `wait()` returns when the driver
exits or when a `hang` fault point (`onceflow.spark.faults`) has written its file; then
`kill()` SIGKILLs the driver's process group and the process group of the hanging Python
worker (Spark's worker daemon puts its workers in a group of their own), which is what a crash
of the driver's machine does to a local-mode application. Used by `onceflow demo` and the
crash tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from onceflow.process import child_options

__all__ = ["DriverProcess", "Outcome"]


@dataclass(frozen=True)
class Outcome:
    """How a driver run ended: `fault` names the fault point reached (then it was killed),
    else `exit_code` is the driver's exit status."""

    exit_code: int | None
    fault: str | None
    seconds: float


class DriverProcess:
    """A pipeline driver in its own process group, its output appended to `log_path`."""

    def __init__(self, args: list[str], log_path: Path, faults_dir: Path | None = None):
        self.faults_dir = faults_dir
        for stale in self._fault_files():  # left by a run killed meanwhile
            stale.unlink()
        self.started = time.monotonic()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYSPARK_PYTHON": sys.executable}
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "onceflow.spark.pipeline", *args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                **child_options(),  # stops with us even if we are SIGKILLed
            )

    def _fault_files(self) -> list[Path]:
        if self.faults_dir is None or not self.faults_dir.is_dir():
            return []
        return sorted(p for p in self.faults_dir.iterdir() if not p.name.startswith("."))

    def wait(self, timeout: float, on_tick: Callable[[], None] | None = None) -> Outcome:
        """Until the driver exits or a fault point is reached (then the driver is killed);
        raises TimeoutError (after killing it) when neither happens within `timeout` s.
        `on_tick()` runs about every 50 ms meanwhile (progress, injecting other faults)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if on_tick is not None:
                on_tick()
            code = self.proc.poll()
            faults = self._fault_files()
            if faults:
                self.kill(faults)
                return Outcome(None, faults[0].name, time.monotonic() - self.started)
            if code is not None:
                return Outcome(code, None, time.monotonic() - self.started)
            time.sleep(0.05)
        self.kill(self._fault_files())
        raise TimeoutError(f"the Spark driver neither finished nor crashed within {timeout:.0f}s")

    def kill(self, fault_files: list[Path] | None = None) -> None:
        """SIGKILL the driver's process group and every hanging worker's group."""
        groups = {self.proc.pid}
        for path in fault_files or []:
            try:
                groups.add(os.getpgid(int(path.read_text())))
            except (OSError, ValueError):
                pass
        for group in groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.proc.wait()
        for path in self._fault_files():  # every task that reached a point, not just the first
            path.unlink(missing_ok=True)
