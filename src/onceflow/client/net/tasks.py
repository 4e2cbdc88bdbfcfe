"""Background tasks of a client's I/O loop, owned so that none is lost or fails unseen.

asyncio keeps only weak references to tasks, so a task nobody holds may vanish mid-flight,
and an exception in one nobody awaits is reported at best when it is garbage-collected. Each
I/O component starts its request tasks through a `BackgroundTasks`: the task is held until it
ends; an unexpected exception is logged with its traceback and handed to the `on_error` the
component gave, which records it where the application's next call will raise it (and undoes
what the task left half-done, such as a request marked in flight). Cancellation (the client
closing) is not a failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["BackgroundTasks"]


class BackgroundTasks:
    """The tasks one I/O component started (use from its event loop only)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(
        self,
        coro: Coroutine[Any, Any, Any],
        what: str,
        on_error: Callable[[BaseException], None],
    ) -> asyncio.Task[Any]:
        """Run `coro`; if it raises, log `what` failed and call `on_error(exception)`."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._done(t, what, on_error))
        return task

    def _done(
        self, task: asyncio.Task[Any], what: str, on_error: Callable[[BaseException], None]
    ) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        self._logger.error("%s failed unexpectedly", what, exc_info=error)
        try:
            on_error(error)
        except Exception:  # the handler itself is broken: still say so
            self._logger.exception("handling the failure of %s failed", what)
