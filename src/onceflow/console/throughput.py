"""The overview's throughput sparkline: records written per second across the cluster,
measured by the console itself from the high watermarks it reads at each overview poll (so it
works on any Kafka-compatible cluster, without the broker's metrics).

Between two polls a partition's high watermark grows by the records (and transaction markers)
written to it; partitions that appear, disappear or shrink (a topic deleted and made again)
count nothing for that interval. Polls closer together than `MIN_INTERVAL_MS` (a second tab,
the JSON API next to the page) reuse the last measurement instead of making a new one; the last
`MAX_SAMPLES` intervals are kept (about three minutes at the pages' 3-second polling).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

from onceflow.common import TopicPartition

MAX_SAMPLES = 60
MIN_INTERVAL_MS = 1000
WIDTH, HEIGHT = 240, 40


@dataclass(frozen=True)
class ThroughputSample:
    """The interval that ended at `time_ms`: `records` written in it, at `records_per_s`."""

    time_ms: int
    records: int
    records_per_s: float


class ThroughputHistory:
    """The high watermarks of the last poll and the samples measured so far (the console's
    gathering runs one at a time, so no lock)."""

    def __init__(self, max_samples: int = MAX_SAMPLES) -> None:
        self._samples: deque[ThroughputSample] = deque(maxlen=max_samples)
        self._last_ms: int | None = None
        self._last: dict[TopicPartition, int] = {}

    def due(self, now_ms: int) -> bool:
        """Whether a poll at `now_ms` measures (False: too close to the last one)."""
        return self._last_ms is None or now_ms - self._last_ms >= MIN_INTERVAL_MS

    def record(self, now_ms: int, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Measure the interval since the last poll (none on the first)."""
        if not self.due(now_ms):
            return
        if self._last_ms is not None:
            written = sum(
                hw - self._last[tp]
                for tp, hw in high_watermarks.items()
                if tp in self._last and hw >= self._last[tp]
            )
            seconds = (now_ms - self._last_ms) / 1000
            self._samples.append(ThroughputSample(now_ms, written, round(written / seconds, 1)))
        self._last_ms = now_ms
        self._last = {tp: hw for tp, hw in high_watermarks.items() if hw >= 0}

    def samples(self) -> list[ThroughputSample]:
        return list(self._samples)


def sparkline_svg(samples: list[ThroughputSample]) -> str:
    """An inline SVG line of the rates, oldest on the left, scaled to the highest one."""
    if len(samples) < 2:
        return '<p id="throughput">Throughput: measuring (it needs two more polls).</p>'
    top = max(s.records_per_s for s in samples) or 1.0
    step = WIDTH / (len(samples) - 1)
    points = " ".join(
        f"{i * step:.1f},{HEIGHT - 2 - (HEIGHT - 4) * s.records_per_s / top:.1f}"
        for i, s in enumerate(samples)
    )
    last = samples[-1]
    label = f"{last.records_per_s:g} records/s now, at most {top:g} in the last {len(samples)}"
    return (
        f'<p id="throughput">Throughput: <svg class="sparkline" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<polyline fill="none" stroke="#36c" stroke-width="1.5" points="{points}"/></svg> '
        f"{escape(label)} intervals (high watermark growth between polls).</p>"
    )
