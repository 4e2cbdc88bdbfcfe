"""`BrokerProcess`: a real `onceflow broker` in a child process, for interop and fault tests.

It spawns `python -m onceflow broker` on `127.0.0.1:0`, waits (bounded) for the ready line
`onceflow broker ready on HOST:PORT`, and keeps the broker's stderr in `<data_dir>.stderr.log`
beside the data directory (`log_text()` reads it). `restart()` reuses the data directory and
rebinds the same port when it can; `pause()`/`resume()` send SIGSTOP/SIGCONT.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

READY_PREFIX = "onceflow broker ready on "
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class BrokerStartError(RuntimeError):
    """The broker process exited or stayed silent instead of printing its ready line."""


class BrokerProcess:
    """A broker child process bound to 127.0.0.1; use as a context manager or call `stop()`."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        extra_config: dict[str, object] | None = None,
        advertised_listener: str | None = None,
        *,
        start: bool = True,
        log_level: str = "INFO",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.extra_config = dict(extra_config or {})
        self.advertised_listener = advertised_listener
        self.log_level = log_level
        self.stderr_path = self.data_dir.parent / f"{self.data_dir.name}.stderr.log"
        self.host = "127.0.0.1"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        if start:
            self.start()

    @property
    def bootstrap(self) -> str:
        """`bootstrap.servers` for clients: `127.0.0.1:PORT`."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self, port: int) -> list[str]:
        """The argv used to start the broker on `port`."""
        cmd = [
            sys.executable,
            "-m",
            "onceflow",
            "broker",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"127.0.0.1:{port}",
            "--log-level",
            self.log_level,
        ]
        if self.advertised_listener:
            cmd += ["--advertised-listener", self.advertised_listener]
        for key, value in self.extra_config.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            cmd += ["--set", f"{key}={text}"]
        return cmd

    def start(self, port: int = 0, timeout: float = START_TIMEOUT_S) -> None:
        """Spawn the broker and wait for its ready line; raises BrokerStartError."""
        if self.is_running():
            raise RuntimeError("broker already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - the child owns it after spawn
        try:
            self.proc = subprocess.Popen(
                self.command(port),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        finally:
            stderr.close()
        line = self._read_ready_line(timeout)
        address = line[len(READY_PREFIX) :].strip()
        host, _, port_text = address.rpartition(":")
        self.host = host.strip("[]")
        self.port = int(port_text)

    def _read_ready_line(self, timeout: float) -> str:
        proc = self.proc
        if proc is None or proc.stdout is None:
            raise RuntimeError("broker process not started")
        deadline = time.monotonic() + timeout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while b"\n" not in buffer:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise BrokerStartError(
                        f"broker printed no ready line in {timeout}s; stderr:\n{self.log_text()}"
                    )
                if not selector.select(remaining):
                    continue
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    code = proc.wait()
                    raise BrokerStartError(
                        f"broker exited with {code} before ready; stderr:\n{self.log_text()}"
                    )
                buffer += chunk
        line = buffer.split(b"\n", 1)[0].decode()
        if not line.startswith(READY_PREFIX):
            self.kill()
            raise BrokerStartError(f"unexpected first stdout line {line!r}")
        return line

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in `timeout`. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            self._signal(signal.SIGCONT)  # a paused broker cannot handle SIGTERM
            self._signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close_pipes()
        return proc.returncode

    def kill(self) -> int | None:
        """SIGKILL (a crash) and wait. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self._close_pipes()
        return proc.returncode

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT_S) -> None:
        """Stop (or kill) and start again on the same data directory, rebinding the same port
        if possible (falls back to a new port when another process took it)."""
        if kill:
            self.kill()
        else:
            self.stop()
        old_port = self.port
        deadline = time.monotonic() + 5.0
        while True:
            try:
                self.start(old_port, timeout)
                return
            except BrokerStartError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
        self.start(0, timeout)

    def pause(self) -> None:
        """SIGSTOP: the process freezes with its sockets open."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause()`."""
        self._signal(signal.SIGCONT)

    def log_text(self) -> str:
        """Everything the broker wrote to stderr so far (across restarts)."""
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)

    def _close_pipes(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"BrokerProcess({self.data_dir}, {self.bootstrap}, pid={self.pid})"
