"""Reading a Prometheus endpoint (the broker's `onceflow.metrics.listener`): one GET with a
timeout, the text parsed by `onceflow.prometheus.parse`, and lookups by name and label. Used by
`onceflow topics describe --metrics-url` and the console's broker metrics.

`scrape` raises `ScrapeError` with one sentence for everything that can go wrong: the endpoint
refuses or times out, answers with an HTTP error, or answers with text that is not Prometheus'.
"""

from __future__ import annotations

import math
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime

from onceflow.prometheus import Sample, parse

TIMEOUT_S = 10.0
MAX_BYTES = 64 * 1024 * 1024  # a broker with 10 000 partitions answers a few MB


class ScrapeError(Exception):
    """The endpoint could not be read; the message says why, in one line."""


class Scrape:
    """The samples of one scrape."""

    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def series(self, name: str) -> Iterator[Sample]:
        """Every sample of `name` (any labels)."""
        return (s for s in self.samples if s.name == name)

    def value(self, name: str, default: float | None = None) -> float | None:
        """The first sample of `name`, or `default` when there is none."""
        return next((s.value for s in self.series(name)), default)

    def total(self, name: str) -> float | None:
        """The sum of every sample of `name`, or None when there is none."""
        values = [s.value for s in self.series(name)]
        return sum(values) if values else None

    def by_label(self, name: str, label: str) -> dict[str, float]:
        """`name`'s samples keyed by the value of `label`."""
        return {s.labels.get(label, ""): s.value for s in self.series(name)}

    def by_partition(self, name: str) -> dict[tuple[str, int], float]:
        """`name`'s samples keyed by (topic, partition) (those with both labels)."""
        out = {}
        for s in self.series(name):
            topic, partition = s.labels.get("topic"), s.labels.get("partition", "")
            if topic is not None and partition.isdigit():
                out[(topic, int(partition))] = s.value
        return out


def scrape(url: str, timeout_s: float = TIMEOUT_S, only: tuple[str, ...] | None = None) -> Scrape:
    """GET `url` and parse its Prometheus text (with `only`, the samples whose names start with
    one of those prefixes: `prometheus.parse`)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body = response.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise ScrapeError(f"{url} answered HTTP {exc.code} {exc.reason}") from None
    except (OSError, ValueError) as exc:  # URLError, timeouts, refused; a malformed URL
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise ScrapeError(f"{url} did not answer: {reason}") from None
    if len(body) > MAX_BYTES:
        raise ScrapeError(f"{url} answered more than {MAX_BYTES} bytes")
    try:
        return Scrape(parse(body.decode(), only))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ScrapeError(f"{url} did not answer Prometheus text: {exc}") from None


# the broker's series of a compacted partition's cleaning (broker.metrics)
CLEANING = ("onceflow_partition_dirty_ratio", "onceflow_partition_last_cleaned_timestamp_ms")


def partition_cleaning(metrics: Scrape) -> dict[tuple[str, int], tuple[float, str]]:
    """(topic, partition) -> (dirty ratio, last cleaned as `utc_text`) of every compacted
    partition (a scrape with `only=CLEANING` suffices)."""
    ratios, cleaned = (metrics.by_partition(name) for name in CLEANING)
    return {
        key: (ratio, utc_text(cleaned.get(key, -1)))
        for key, ratio in ratios.items()
        if math.isfinite(ratio)
    }


def utc_text(timestamp_ms: float) -> str:
    """A timestamp gauge in ms since the epoch as UTC text; `never` for the -1 the broker
    exports for something that has not happened."""
    if timestamp_ms < 0:
        return "never"
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
