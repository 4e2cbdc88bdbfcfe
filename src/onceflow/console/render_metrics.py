"""HTML of the broker's own metrics (`broker_metrics`): the overview's "Broker metrics" panel
and the topic page's "Log cleaning" table. An endpoint that could not be read is one sentence
in place of the figures."""

from __future__ import annotations

from html import escape

from onceflow.console.broker_metrics import BrokerFigures, FlushLatency, TopicFigures
from onceflow.console.render import table, warn


def overview_panel(figures: BrokerFigures | None) -> str:
    """The "Broker metrics" section ("" without a metrics endpoint)."""
    if figures is None:
        return ""
    head = f"<h2>Broker metrics</h2><p>From {escape(figures.url)}.</p>"
    if figures.error is not None:
        return head + f'<p class="warn" id="broker-metrics-error">{escape(figures.error)}</p>'
    f = figures
    fsync = f.fsync
    hanging = f.hanging_transactions
    rows = [
        ["log flushes (fsync)", _text(fsync.flushes if fsync else None)],
        ["fsync mean", _ms(fsync.mean_ms if fsync else None)],
        ["fsync median", _bound(fsync, fsync.p50_le_ms if fsync else None)],
        ["fsync 99th percentile", _bound(fsync, fsync.p99_le_ms if fsync else None)],
        ["fenced producers (total)", _text(f.fenced_producers)],
        ["transactions committed", _with_rate(f.transactions_committed, f.committed_per_s)],
        ["transactions aborted", _with_rate(f.transactions_aborted, f.aborted_per_s)],
        ["open transactions", _text(f.open_transactions)],
        ["hanging transactions", warn(str(hanging)) if hanging else _text(hanging)],
        ["oldest open transaction", _seconds(f.oldest_open_age_s)],
        ["transactional ids, last committed", _text(f.committed_ids)],
        ["transactional ids, last aborted", _text(f.aborted_ids)],
        ["log cleaner max dirty ratio", _text(f.cleaner_max_dirty_ratio)],
        ["log cleaner last ran", _ago(f.cleaner_seconds_since_last_run)],
        ["requests", _with_rate(f.requests, f.requests_per_s)],
        ["produce requests", _with_rate(f.produce_requests, f.produce_requests_per_s)],
        ["produce errors (total)", _text(f.produce_errors)],
        ["duplicate batches (total)", _text(f.duplicate_batches)],
    ]
    return head + table(["figure", "value"], rows).replace(
        "<table>", '<table id="broker-metrics">', 1
    )


def topic_panel(figures: TopicFigures | None) -> str:
    """The "Log cleaning" section of a topic: its compacted partitions ("" when it has none,
    or without a metrics endpoint)."""
    if figures is None:
        return ""
    if figures.error is not None:
        return f'<h2>Log cleaning</h2><p class="warn">{escape(figures.error)}</p>'
    if not figures.cleaning:
        return ""
    rows = [[c.partition, c.dirty_ratio, c.last_cleaned] for c in figures.cleaning]
    return "<h2>Log cleaning</h2>" + table(["partition", "dirty ratio", "last cleaned"], rows)


def _text(value: object) -> str:
    return "–" if value is None else str(value)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:g} ms"


def _bound(fsync: FlushLatency | None, value: float | None) -> str:
    if fsync is None or not fsync.flushes:
        return "–"
    return "above the largest bucket" if value is None else f"≤ {value:g} ms"


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:g} s"


def _ago(value: float | None) -> str:
    return "never" if value is None else f"{value:g} s ago"


def _with_rate(total: int | None, per_s: float | None) -> str:
    if total is None:
        return "–"
    return f"{total}" if per_s is None else f"{total} ({per_s:g}/s)"
