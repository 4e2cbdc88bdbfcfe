"""Broker metrics in Prometheus' text format, on an optional plain-HTTP listener.

`onceflow.metrics.listener=HOST:PORT` (unset by default: no listener) makes the broker answer
`GET /metrics` on that address with the text exposition format 0.0.4. The server is a few lines
of asyncio (one request per connection, `Connection: close`), no extra dependency. Any other
path is 404, any other method 405; a request head larger than 8 KiB or slower than 5 s is
dropped.

Figures (KIP-98's design names the first two as the ones that make idempotence and
transactions operable: the live producer-id count as a proxy for the memory the sequence maps
take, the last stable offset to spot consumers stuck behind a hanging transaction):

- `onceflow_partition_live_producer_ids{topic,partition}` gauge: producer ids with state.
- `onceflow_partition_last_stable_offset{topic,partition}` gauge: the read_committed bound.
- `onceflow_partition_high_watermark{topic,partition}`, `onceflow_partition_log_end_offset`,
  `onceflow_partition_log_start_offset` gauges.
- `onceflow_requests_total{api}` counter: requests received per API (Kafka's
  `RequestsPerSec{request=...}`, as a count).
- `onceflow_produce_errors_total{error}` counter: partitions of Produce requests answered with
  an error, by Kafka error name (Kafka's `ErrorsPerSec{request=Produce,error=...}`).
- `onceflow_produce_duplicate_batches_total` counter: retried batches answered from the
  producer window without being written again (Kafka folds these into its error metrics as
  DUPLICATE_SEQUENCE_NUMBER; a separate counter is clearer).
- `onceflow_producer_ids_expired_total` counter: producer ids dropped by
  `producer.id.expiration.ms`.
- `onceflow_producer_ids_allocated_total` counter: ids handed out (idempotent and
  transactional producers).

- `onceflow_transactional_ids{state}` gauge: transactional ids known to the transaction
  coordinator, by Kafka's state name ("Ongoing", "CompleteCommit", ...); the "Ongoing" series is
  the number of open transactions (Kafka's coordinator exposes the partition count only).
- `onceflow_consumer_groups{state}` gauge: groups of the group coordinator by Kafka's state
  name ("Stable", "Empty", ...; Kafka's `NumGroups<State>`), and
  `onceflow_consumer_group_members{group}` gauge: members per group.
- `onceflow_log_cleaner_bytes_read_total`, `onceflow_log_cleaner_bytes_written_total`,
  `onceflow_log_cleaner_records_removed_total` counters, `onceflow_log_cleaner_max_dirty_ratio`
  and `onceflow_log_cleaner_seconds_since_last_run` gauges: the log cleaner (`log.cleaner`);
  `onceflow_partition_dirty_ratio{topic,partition}` and
  `onceflow_partition_last_cleaned_timestamp_ms{topic,partition}` gauges for each compacted log.
- the exactly-once figures of `broker.metrics_eos`: `onceflow_transactions_hanging`,
  `onceflow_transaction_oldest_open_age_seconds`, `onceflow_producers_fenced_total`,
  `onceflow_consumer_group_lag{group,topic,partition}` and the `onceflow_log_flush_seconds`
  histogram.
Values are read when scraped; the counters cost one list/dict increment per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

from onceflow.broker.listeners import Listener
from onceflow.broker.metrics_base import ScrapedState, partition_labels
from onceflow.broker.metrics_eos import render_exactly_once
from onceflow.prometheus import CONTENT_TYPE, escape, header
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from onceflow.log.partition import PartitionLog

log = logging.getLogger("onceflow.broker.metrics")

MAX_REQUEST_HEAD = 8192
REQUEST_TIMEOUT_S = 5.0
_API_SLOTS = 128  # api keys are small integers; larger ones go to a dict

_PARTITION_GAUGES: tuple[tuple[str, str, Callable[[PartitionLog], int]], ...] = (
    ("onceflow_partition_live_producer_ids", "Producer ids with state on the partition.",
     lambda p: p.live_producer_count),
    ("onceflow_partition_log_start_offset", "First offset a consumer may fetch.",
     lambda p: p.log_start_offset),
    ("onceflow_partition_log_end_offset", "Offset the next appended record gets.",
     lambda p: p.log_end_offset),
    ("onceflow_partition_high_watermark", "Offsets below this are visible (read_uncommitted).",
     lambda p: p.high_watermark),
    ("onceflow_partition_last_stable_offset", "Offsets below this are visible (read_committed).",
     lambda p: p.last_stable_offset),
)  # fmt: skip


class BrokerMetrics:
    """Counters updated by the connection and handlers; `render` adds the partition gauges."""

    def __init__(self) -> None:
        self._requests = [0] * _API_SLOTS
        self._other_requests: Counter[int] = Counter()
        self.produce_errors: Counter[int] = Counter()
        self.duplicate_batches = 0
        self.expired_producer_ids = 0

    def count_request(self, api_key: int) -> None:
        """One request of `api_key` arrived (called for every decoded request)."""
        if 0 <= api_key < _API_SLOTS:
            self._requests[api_key] += 1
        else:
            self._other_requests[api_key] += 1

    def requests(self, api_key: int) -> int:
        """Requests of `api_key` counted so far."""
        if 0 <= api_key < _API_SLOTS:
            return self._requests[api_key]
        return self._other_requests[api_key]

    def render(self, state: ScrapedState | None) -> str:
        """The Prometheus text exposition of every metric."""
        out: list[str] = []
        header(out, "onceflow_requests_total", "counter", "Requests received, by API.")
        counts = {k: n for k, n in enumerate(self._requests) if n} | dict(self._other_requests)
        for api_key in sorted(counts):
            out.append(f'onceflow_requests_total{{api="{_api_label(api_key)}"}} {counts[api_key]}')
        header(
            out, "onceflow_produce_errors_total", "counter", "Produce partitions answered with "
            "an error, by error."
        )  # fmt: skip
        for code in sorted(self.produce_errors):
            out.append(
                f'onceflow_produce_errors_total{{error="{_error_label(code)}"}} '
                f"{self.produce_errors[code]}"
            )
        for name, value, text in (
            ("onceflow_produce_duplicate_batches_total", self.duplicate_batches,
             "Retried batches answered from the producer window, not written again."),
            ("onceflow_producer_ids_expired_total", self.expired_producer_ids,
             "Producer ids removed after producer.id.expiration.ms."),
            ("onceflow_producer_ids_allocated_total",
             state.producer_ids.allocated if state is not None else 0,
             "Producer ids handed out (InitProducerId of idempotent and transactional "
             "producers)."),
        ):  # fmt: skip
            header(out, name, "counter", text)
            out.append(f"{name} {value}")
        _render_transactional_ids(out, state)
        _render_groups(out, state)
        _render_cleaner(out, state)
        render_exactly_once(out, state)
        logs = []
        if state is not None:
            logs = sorted(state.logs.all_logs(), key=lambda p: (p.topic, p.partition))
        for name, text, read in _PARTITION_GAUGES:
            header(out, name, "gauge", text)
            for partition_log in logs:
                labels = partition_labels(partition_log.topic, partition_log.partition)
                out.append(f"{name}{{{labels}}} {read(partition_log)}")
        out.append("")
        return "\n".join(out)


def _render_transactional_ids(out: list[str], state: ScrapedState | None) -> None:
    name = "onceflow_transactional_ids"
    header(out, name, "gauge", "Transactional ids of the transaction coordinator, by state.")
    transactions = getattr(state, "transactions", None)
    if transactions is None or not transactions.loaded:
        return
    by_state = Counter(t.state for t in transactions.coordinator.list_transactions().transactions)
    for txn_state in sorted(by_state):
        out.append(f'{name}{{state="{escape(txn_state)}"}} {by_state[txn_state]}')


def _render_cleaner(out: list[str], state: ScrapedState | None) -> None:
    """The log cleaner's totals (Kafka's `LogCleaner` and `LogCleanerManager` metrics)."""
    cleaner = state.logs.cleaner if state is not None else None
    totals = cleaner.totals if cleaner is not None else None
    since = cleaner.seconds_since_last_run() if cleaner is not None else None
    for name, kind, value, text in (
        ("onceflow_log_cleaner_bytes_read_total", "counter",
         totals.bytes_read if totals else 0, "Bytes of segments read by cleaning rounds."),
        ("onceflow_log_cleaner_bytes_written_total", "counter",
         totals.bytes_written if totals else 0, "Bytes of cleaned segments written."),
        ("onceflow_log_cleaner_records_removed_total", "counter",
         totals.records_removed if totals else 0,
         "Records removed (superseded, aborted, expired tombstones and markers)."),
        ("onceflow_log_cleaner_max_dirty_ratio", "gauge",
         cleaner.max_dirty_ratio() if cleaner is not None else 0.0,
         "Highest dirty ratio of any compacted log (Kafka's max-dirty-percent, as a ratio)."),
        ("onceflow_log_cleaner_seconds_since_last_run", "gauge",
         -1 if since is None else round(since, 3),
         "Seconds since the cleaner last ran a round or checked for dirty logs; -1 if never."),
    ):  # fmt: skip
        header(out, name, kind, text)
        out.append(f"{name} {value}")
    compacted = [] if cleaner is None else cleaner.compacted_logs()
    for name, text, read in (
        ("onceflow_partition_dirty_ratio", "Dirty bytes over cleanable bytes of a compacted log.",
         cleaner.dirty_ratio if cleaner else None),
        ("onceflow_partition_last_cleaned_timestamp_ms",
         "When the cleaner last finished a round on a compacted log (ms since the epoch); -1 "
         "if never.", cleaner.last_clean_ms if cleaner else None),
    ):  # fmt: skip
        header(out, name, "gauge", text)
        if read is None:
            continue
        for partition_log in compacted:
            labels = partition_labels(partition_log.topic, partition_log.partition)
            value = read(partition_log)
            out.append(
                f"{name}{{{labels}}} {round(value, 4) if isinstance(value, float) else value}"
            )


def _render_groups(out: list[str], state: ScrapedState | None) -> None:
    coordinator = getattr(state, "group_coordinator", None)
    groups = [] if coordinator is None else sorted(coordinator.groups.values(),
                                                   key=lambda g: g.group_id)  # fmt: skip
    name = "onceflow_consumer_groups"
    header(out, name, "gauge", "Consumer groups of the group coordinator, by state.")
    by_state = Counter(g.state.value for g in groups)
    for group_state in sorted(by_state):
        out.append(f'{name}{{state="{escape(group_state)}"}} {by_state[group_state]}')
    name = "onceflow_consumer_group_members"
    header(out, name, "gauge", "Members of each consumer group.")
    for group in groups:
        out.append(f'{name}{{group="{escape(group.group_id)}"}} {len(group.members)}')


def _api_label(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN_{api_key}"


def _error_label(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


class MetricsServer:
    """The `/metrics` HTTP listener; `await start(listener)`, `await stop()`."""

    def __init__(self, metrics: BrokerMetrics, state: ScrapedState) -> None:
        self.metrics = metrics
        self.state = state
        self.bound: Listener | None = None
        self._server: asyncio.base_events.Server | None = None

    async def start(self, listener: Listener) -> None:
        """Bind `listener` (port 0 picks a free port; see `bound`)."""
        self._server = await asyncio.start_server(
            self._serve, listener.host, listener.port, reuse_address=True, limit=MAX_REQUEST_HEAD
        )
        port = self._server.sockets[0].getsockname()[1]
        self.bound = Listener(listener.host, port)
        log.info("metrics on http://%s/metrics", self.bound)

    async def stop(self) -> None:
        """Close the listener (connections in progress finish or time out)."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            method = parts[0] if parts else ""
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                status, body = "400 Bad Request", "bad request\n"
            elif method not in ("GET", "HEAD"):
                status, body = "405 Method Not Allowed", "only GET\n"
            elif parts[1].split("?", 1)[0] != "/metrics":
                status, body = "404 Not Found", "try /metrics\n"
            else:
                status, body = "200 OK", self.metrics.render(self.state)
            payload = body.encode()
            writer.write(
                (
                    f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
                    f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
                ).encode()
            )
            if method != "HEAD":
                writer.write(payload)
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except ConnectionError:
            pass
        finally:
            writer.close()
