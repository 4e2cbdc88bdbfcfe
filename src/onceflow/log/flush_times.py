"""How long each partition log's flush (fsync) takes, as a fixed-bucket histogram.

The group committer (`log.durability`) observes every `PartitionLog.flush` it runs; the
broker's metrics render the histogram in Prometheus' format (`onceflow_log_flush_seconds`).
The buckets span a page-cache flush on tmpfs (100 µs) to a stalled disk (10 s).
"""

from __future__ import annotations

import bisect
from typing import Final

BUCKETS: Final[tuple[float, ...]] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)  # fmt: skip


class FlushTimes:
    """Counts of flush durations per bucket (upper bounds `BUCKETS`, then +Inf), their sum
    and count. Observed from the committer's one worker thread; read when scraped (a scrape
    may see a count one observation ahead of the sum, which Prometheus tolerates)."""

    def __init__(self) -> None:
        self._counts = [0] * (len(BUCKETS) + 1)
        self.total_seconds = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        """Record one flush that took `seconds`."""
        self._counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total_seconds += seconds
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, flushes at or below it) per bucket, ending with (inf, count)."""
        out, running = [], 0
        for bound, n in zip((*BUCKETS, float("inf")), self._counts, strict=True):
            running += n
            out.append((bound, running))
        return out
