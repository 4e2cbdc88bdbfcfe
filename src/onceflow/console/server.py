"""The console served beside something else in the same process: uvicorn in a daemon thread,
started and stopped by the command that embeds it (`onceflow broker --console`, `onceflow
demo --console`), and the parsing of their `--console HOST:PORT`.

uvicorn is imported only when a server starts, so a process without the `console` extra
reaches `console_address`, which says what is missing, before anything fails.
"""

from __future__ import annotations

import importlib.util
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


def console_address(text: str, option: str = "--console") -> tuple[str, int]:
    """(host, port) of `option HOST:PORT`; ValueError, its message the one line to print, when
    malformed or when the console extra is not installed."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{option} {text!r}: expected HOST:PORT")
    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise ValueError(f"{option} needs {', '.join(missing)}: pip install 'onceflow[console]'")
    return host.strip("[]"), int(port)


class ConsoleServer:
    """An ASGI `app` (the console, or an app mounting it) served from a daemon thread."""

    def __init__(self, app: Any, name: str = "console") -> None:
        self.app = app
        self.name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, host: str, port: int) -> None:
        """Serve on host:port; returns once the server listens (OSError when it cannot, e.g.
        the address is in use)."""
        import uvicorn

        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=self.name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise OSError(f"the console could not listen on {host}:{port}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop serving (requests in progress finish; the app's shutdown runs)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(STOP_TIMEOUT_S)
        self._server = self._thread = None
