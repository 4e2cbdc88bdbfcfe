"""The client's I/O thread: one asyncio event loop in one background thread per client.

The public producer and consumer APIs are synchronous (they run inside Spark executors, among
other places); all network I/O runs here, like Kafka's sender thread. Application threads talk
to the loop through `wakeup()` (coalesced: at most one pending wake-up), `call()` (run a
coroutine and wait for its result) and thread-safe data structures.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, TypeVarTuple

from onceflow.client.errors import KafkaTimeoutError

__all__ = ["IOThread"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but stay usable without
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class IOThread:
    """Runs `main(io)` on a private event loop in a daemon thread."""

    def __init__(self, name: str, main: Callable[[IOThread], Coroutine[Any, Any, None]]) -> None:
        self.name = name
        self._main = main
        self.loop = _new_loop()
        self.wake_event: asyncio.Event | None = None
        self._wake_scheduled = False
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._started.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._bootstrap())
        except Exception:
            log.exception("%s: I/O loop crashed", self.name)
        finally:
            try:
                pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
                for task in pending:
                    task.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()
                self._started.set()

    async def _bootstrap(self) -> None:
        self.wake_event = asyncio.Event()
        self._started.set()
        await self._main(self)

    def _wake(self) -> None:
        self._wake_scheduled = False
        if self.wake_event is not None:
            self.wake_event.set()

    def wakeup(self) -> None:
        """Wake the loop's main task (thread-safe, coalesced)."""
        if self._wake_scheduled:
            return
        self._wake_scheduled = True
        try:
            self.loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # loop closed
            self._wake_scheduled = False

    async def wait(self, timeout_s: float) -> None:
        """In the loop: wait for a wake-up or `timeout_s`, then clear the event."""
        event = self.wake_event
        if event is None:
            raise RuntimeError(f"{self.name}: wait() outside the running I/O loop")
        if not event.is_set() and timeout_s > 0:
            try:
                await asyncio.wait_for(event.wait(), timeout_s)
            except TimeoutError:
                pass
        event.clear()

    def call(self, coro: Coroutine[Any, Any, _T], timeout_s: float | None = None) -> _T:
        """Run `coro` on the loop and wait for its result (from another thread)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise KafkaTimeoutError(f"operation did not complete within {timeout_s} s") from None

    def call_soon(self, fn: Callable[[*_Ts], object], *args: *_Ts) -> None:
        """Schedule `fn(*args)` on the loop (thread-safe)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait for the thread to end; True when it did."""
        if threading.current_thread() is self._thread:
            return False
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()
