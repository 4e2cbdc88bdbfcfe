"""The figures only onceflow's broker gives (its Prometheus `/metrics`, `onceflow.metrics.listener`)
for the console's pages: what the Kafka admin API cannot say about exactly-once.

The overview's `BrokerFigures`: log flush (fsync) latency from the `onceflow_log_flush_seconds`
histogram (count, mean, and the bucket bounds holding the median and the 99th percentile),
fenced producers, transactions committed and aborted (totals and rates), transactional ids
by state (open, last committed, last aborted), hanging transactions and the oldest open one's
age, the log cleaner's max dirty ratio and time since its last run, and request, produce and
error counts (rates: growth since the previous scrape).
The topic page's `TopicFigures`: each compacted partition's dirty ratio and last cleaning.

Nothing here fails a page: an endpoint that is down or answers something else leaves the
figures empty and says why in `error`. Every value is finite (JSON has no Infinity or NaN).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from onceflow.console.transactions import OPEN_STATES
from onceflow.scrape import CLEANING, Scrape, ScrapeError, partition_cleaning, scrape

SCRAPE_TIMEOUT_S = 3.0  # a page waits at most this long for the metrics
MIN_RATE_INTERVAL_S = 1.0  # scrapes closer together keep the rates of the last interval
_PROOF = "onceflow_requests_total"  # every onceflow broker exports it
# the families each page reads (name prefixes): the partition gauges, 5 per partition, are
# most of a large broker's text and are skipped unread
_OVERVIEW = ("onceflow_produce", "onceflow_transaction", "onceflow_log_cleaner_",
             "onceflow_log_flush_seconds")  # fmt: skip


@dataclass(frozen=True)
class FlushLatency:
    """The fsync histogram: flushes so far, their mean, and the upper bounds (ms) of the
    buckets holding the median and the 99th percentile (None: above the largest bound)."""

    flushes: int
    mean_ms: float | None
    p50_le_ms: float | None
    p99_le_ms: float | None


@dataclass(frozen=True)
class BrokerFigures:
    url: str
    error: str | None = None  # why the endpoint could not be read; the rest is then empty
    fsync: FlushLatency | None = None
    fenced_producers: int | None = None
    transactional_ids: dict[str, int] = field(default_factory=dict)  # by Kafka state name
    open_transactions: int | None = None
    transactions_committed: int | None = None  # completed since the coordinator started
    transactions_aborted: int | None = None
    committed_per_s: float | None = None  # since the previous scrape (None on the first)
    aborted_per_s: float | None = None
    committed_ids: int | None = None  # ids whose last transaction committed (CompleteCommit)
    aborted_ids: int | None = None  # ... aborted (CompleteAbort)
    hanging_transactions: int | None = None
    oldest_open_age_s: float | None = None
    cleaner_max_dirty_ratio: float | None = None
    cleaner_seconds_since_last_run: float | None = None  # None: never ran (or no cleaner)
    requests: int | None = None
    produce_requests: int | None = None
    produce_errors: int | None = None
    duplicate_batches: int | None = None
    requests_per_s: float | None = None  # since the previous scrape (None on the first)
    produce_requests_per_s: float | None = None


@dataclass(frozen=True)
class PartitionCleaning:
    partition: int
    dirty_ratio: float
    last_cleaned: str  # UTC, or "never"


@dataclass(frozen=True)
class TopicFigures:
    url: str
    error: str | None = None
    cleaning: list[PartitionCleaning] = field(default_factory=list)  # compacted partitions


class MetricsSource:
    """The broker's metrics endpoint at `url`; remembers the last scrape's counters for the
    rates. Thread-safe: the console scrapes outside its cluster lock (a metrics host that
    never answers holds only the page asking it), one scrape at a time (`lock`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.Lock()
        self._last: tuple[float, dict[str, int | None]] | None = None  # (time, counters)
        self._rates: dict[str, float | None] = {}

    def overview(self) -> BrokerFigures:
        """The overview's figures, or a `BrokerFigures` carrying only the error."""
        metrics, error = self._scrape(_OVERVIEW)
        if metrics is None:
            return BrokerFigures(self.url, error=error)
        by_state = {k: int(v) for k, v in metrics.by_label("onceflow_transactional_ids",
                                                           "state").items()}  # fmt: skip
        requests = metrics.by_label("onceflow_requests_total", "api")
        counters = {
            "requests": _count(sum(requests.values())),
            "produce": _count(requests.get("PRODUCE", 0)),
            "committed": _count(metrics.value("onceflow_transactions_committed_total")),
            "aborted": _count(metrics.value("onceflow_transactions_aborted_total")),
        }
        rates = self._rates_at(time.monotonic(), counters)
        since = _finite(metrics.value("onceflow_log_cleaner_seconds_since_last_run"))
        return BrokerFigures(
            self.url,
            fsync=flush_latency(metrics, "onceflow_log_flush_seconds"),
            fenced_producers=_count(metrics.value("onceflow_producers_fenced_total")),
            transactional_ids=by_state,
            open_transactions=sum(by_state.get(s, 0) for s in OPEN_STATES),
            transactions_committed=counters["committed"],
            transactions_aborted=counters["aborted"],
            committed_per_s=rates.get("committed"),
            aborted_per_s=rates.get("aborted"),
            committed_ids=by_state.get("CompleteCommit", 0),
            aborted_ids=by_state.get("CompleteAbort", 0),
            hanging_transactions=_count(metrics.value("onceflow_transactions_hanging")),
            oldest_open_age_s=_finite(
                metrics.value("onceflow_transaction_oldest_open_age_seconds")
            ),
            cleaner_max_dirty_ratio=_finite(metrics.value("onceflow_log_cleaner_max_dirty_ratio")),
            cleaner_seconds_since_last_run=None if since is None or since < 0 else since,
            requests=counters["requests"],
            produce_requests=counters["produce"],
            produce_errors=_count(metrics.total("onceflow_produce_errors_total") or 0),
            duplicate_batches=_count(metrics.value("onceflow_produce_duplicate_batches_total")),
            requests_per_s=rates.get("requests"),
            produce_requests_per_s=rates.get("produce"),
        )

    def topic(self, topic: str) -> TopicFigures:
        """The dirty ratio and last cleaning of `topic`'s compacted partitions."""
        metrics, error = self._scrape(CLEANING)
        if metrics is None:
            return TopicFigures(self.url, error=error)
        rows = [
            PartitionCleaning(p, round(ratio, 4), when)
            for (t, p), (ratio, when) in sorted(partition_cleaning(metrics).items())
            if t == topic
        ]
        return TopicFigures(self.url, cleaning=rows)

    def _scrape(self, only: tuple[str, ...]) -> tuple[Scrape | None, str]:
        """(the samples named by `only`, "") or (None, why not): an endpoint without the
        request counter every onceflow broker exports is not one."""
        try:
            metrics = scrape(self.url, SCRAPE_TIMEOUT_S, (*only, _PROOF))
        except ScrapeError as exc:
            return None, str(exc)
        if metrics.value(_PROOF) is None:
            return None, f"{self.url} serves no onceflow broker metrics (no {_PROOF})"
        return metrics, ""

    def _rates_at(self, now: float, counters: dict[str, int | None]) -> dict[str, float | None]:
        """Each counter's growth per second since the last scrape at least
        `MIN_RATE_INTERVAL_S` earlier (closer scrapes keep the rates of the last interval)."""
        last = self._last
        if last is None or now - last[0] >= MIN_RATE_INTERVAL_S:
            if last is not None:
                span = now - last[0]
                self._rates = {k: _rate(last[1].get(k), v, span) for k, v in counters.items()}
            self._last = (now, counters)
        return self._rates


def flush_latency(metrics: Scrape, name: str) -> FlushLatency | None:
    """The histogram `name` (its `_bucket`, `_sum` and `_count` series) summarised."""
    count = _count(metrics.value(f"{name}_count"))
    if count is None:
        return None
    total_s = _finite(metrics.value(f"{name}_sum"))
    buckets = sorted(
        (float(s.labels.get("le", "nan")), s.value) for s in metrics.series(f"{name}_bucket")
    )
    mean_ms = None if not count or total_s is None else round(total_s / count * 1000, 3)
    return FlushLatency(count, mean_ms, _quantile_le_ms(buckets, count, 0.5),
                        _quantile_le_ms(buckets, count, 0.99))  # fmt: skip


def _quantile_le_ms(buckets: list[tuple[float, float]], count: int, q: float) -> float | None:
    """The upper bound (ms) of the first bucket holding a `q` share of the `count` flushes."""
    if not count:
        return None
    for bound, cumulative in buckets:
        if cumulative >= q * count:
            return round(bound * 1000, 3) if math.isfinite(bound) else None
    return None


def _rate(before: int | None, after: int | None, span_s: float) -> float | None:
    if before is None or after is None or after < before:  # missing, or the broker restarted
        return None
    return round((after - before) / span_s, 2)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _count(value: float | None) -> int | None:
    finite = _finite(value)
    return None if finite is None else int(finite)
