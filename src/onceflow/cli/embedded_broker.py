"""`EmbeddedBroker`: `onceflow broker` as a child process, for commands that need a broker of
their own (`onceflow demo`). It binds 127.0.0.1 (a free port unless one is given), keeps its
stderr in `<data dir>/broker.stderr.log`, and can be killed with SIGKILL and restarted on the
same data directory and port. `settings` are more broker configs (`--set KEY=VALUE`, applied
after `--listen`, so a `listeners` setting replaces the one PLAINTEXT listener).
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from onceflow.process import child_options

__all__ = ["BrokerError", "EmbeddedBroker"]

READY_PREFIX = "onceflow broker ready on "


class BrokerError(Exception):
    """The broker did not start; the message is one line."""


class EmbeddedBroker:
    """`onceflow broker` as a child process on 127.0.0.1 and a free port."""

    def __init__(
        self,
        data_dir: Path,
        timeout: float,
        port: int = 0,
        settings: Mapping[str, object] | None = None,
    ):
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir, self.timeout = data_dir, timeout
        self.settings = dict(settings or {})
        self.stderr_path = data_dir / "broker.stderr.log"
        self._start(port)

    def _start(self, port: int) -> None:
        cmd = [
            sys.executable,
            "-m",
            "onceflow",
            "broker",
            "--data-dir",
            str(self.data_dir / "data"),
            "--listen",
            f"127.0.0.1:{port}",
            "--log-level",
            "WARNING",
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                **child_options(),  # stops with us even if we are SIGKILLed
            )
        self.address = self._wait_ready(self.timeout)

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def kill9(self) -> None:
        """SIGKILL: a crash, nothing flushed or closed cleanly."""
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def restart(self) -> None:
        """Start again on the same data directory and port (retrying while the port is
        still held by the dead process's sockets)."""
        port = self.port
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._start(port)
                return
            except BrokerError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _wait_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        buffer = b""
        stdout = self.proc.stdout
        assert stdout is not None  # started with stdout=PIPE
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BrokerError(
                        f"the broker did not start within {timeout:.0f}s{self._stderr_tail()}"
                    )
                if not selector.select(remaining):
                    continue
                chunk = os.read(stdout.fileno(), 4096)
                if not chunk:
                    raise BrokerError(
                        f"the broker exited with status {self.proc.wait()}{self._stderr_tail()}"
                    )
                buffer += chunk
        line = buffer.split(b"\n", 1)[0].decode(errors="replace")
        if not line.startswith(READY_PREFIX):
            raise BrokerError(f"unexpected broker output {line!r}")
        return line[len(READY_PREFIX) :].strip()

    def _stderr_tail(self) -> str:
        try:
            lines = self.stderr_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1]}" if lines else ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
