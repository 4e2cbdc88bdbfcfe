"""Kafka's cleaner I/O throttle (`log.cleaner.io.max.bytes.per.second`, `kafka.utils.Throttler`).

The cleaning thread reports the bytes it read and wrote; whenever the rate over the current
window (at least 100 ms) exceeds the limit, it sleeps until the rate is back at the limit.
Sleeping also hands the interpreter lock back to the event loop, which is what bounds the
cleaner's cost on produce in one Python process (bench/log_cleaner.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

CHECK_INTERVAL_S = 0.1


class Throttler:
    """Holds a thread to at most `max_bytes_per_second` (no limit: never sleeps)."""

    def __init__(
        self,
        max_bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limit = max_bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._window_start = clock()
        self._bytes = 0

    def maybe_throttle(self, observed: int) -> None:
        """Count `observed` bytes; sleep when the window's rate is above the limit."""
        if self.limit == float("inf"):
            return
        self._bytes += observed
        elapsed = self._clock() - self._window_start
        if elapsed < CHECK_INTERVAL_S:
            return
        needed = self._bytes / self.limit
        if needed > elapsed:
            self._sleep(needed - elapsed)
        self._window_start = self._clock()
        self._bytes = 0
