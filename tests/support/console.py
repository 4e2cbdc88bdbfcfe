"""`onceflow console` run as a command (a child process) for the tests that talk to it over
HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from support.spark_daemons import free_port

START_TIMEOUT_S = 30.0


class ConsoleProcess:
    """`onceflow console --bootstrap-server BOOTSTRAP ARGS...` on a free loopback port; its
    output goes to `log_path`. Use as a context manager: serving on entry, stopped on exit."""

    def __init__(self, bootstrap: str, log_path: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.command = [sys.executable, "-m", "onceflow", "console", "--bootstrap-server",
                        bootstrap, "--listen", f"127.0.0.1:{self.port}", *args]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ConsoleProcess:
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            self.command, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/api/spark", timeout=10):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(self.log_path.read_text()) from None
                if time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError("the console did not start serving") from None
                time.sleep(0.2)

    def get(self, path: str) -> str:
        """The page at `path` (raises urllib's HTTPError for a status >= 400)."""
        with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as answer:
            return str(answer.read().decode())

    def __exit__(self, *exc_info: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None
