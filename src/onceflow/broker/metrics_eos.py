"""The exactly-once figures of the broker's `/metrics` (rendered by `broker.metrics`):

- `onceflow_transactions_hanging` gauge: open transactions (Ongoing, PrepareCommit,
  PrepareAbort) started longer ago than `transaction.max.timeout.ms`. The coordinator aborts
  a transaction after its own timeout, which may not exceed that bound, so a non-zero value
  means a transaction the coordinator failed to finish: it pins the last stable offset of
  its partitions (the console's definition of hanging, docs/console.md).
- `onceflow_transaction_oldest_open_age_seconds` gauge: the age of the oldest open
  transaction; 0 when none is open.
- `onceflow_producers_fenced_total` counter: InitProducerId calls that gave a transactional
  id that already had a producer a new epoch (or producer id): each one fenced the instance
  that held the id before (a restarted Spark task, a zombie producer).
- `onceflow_transactions_committed_total`, `onceflow_transactions_aborted_total` counters:
  transactions this broker's transaction coordinator completed (COMPLETE_COMMIT or
  COMPLETE_ABORT durable, every marker written) since it started; aborts include those of
  timed-out transactions and of fenced producers.
- `onceflow_consumer_group_lag{group,topic,partition}` gauge: a group's committed offset
  behind the partition's last stable offset (what a read_committed consumer can still
  read), for partitions whose log is on this broker. The Spark sink's marker groups
  (`onceflow-markers.*`) are listed too; their offsets are batch ids, filter them out.
- `onceflow_log_flush_seconds` histogram: the duration of each partition log flush (fsync)
  of the group committer, the wait a produce with `flush.on.ack` pays.
"""

from __future__ import annotations

from onceflow.broker.metrics_base import ScrapedState, partition_labels
from onceflow.prometheus import escape, header

OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")  # Kafka's TransactionState names


def render_exactly_once(out: list[str], state: ScrapedState | None) -> None:
    """Append the transaction, fencing, group lag and flush figures."""
    _render_open_transactions(out, state)
    coordinator = None if state is None else state.transactions.coordinator
    name = "onceflow_producers_fenced_total"
    header(out, name, "counter", "InitProducerId calls that fenced the previous producer of a "
           "transactional id.")  # fmt: skip
    out.append(f"{name} {0 if coordinator is None else coordinator.fenced_producers}")
    completer = None if coordinator is None else coordinator.completer
    for name, text, count in (
        ("onceflow_transactions_committed_total", "Transactions completed with a commit.",
         0 if completer is None else completer.committed),
        ("onceflow_transactions_aborted_total", "Transactions completed with an abort.",
         0 if completer is None else completer.aborted),
    ):  # fmt: skip
        header(out, name, "counter", text)
        out.append(f"{name} {count}")
    _render_group_lag(out, state)
    _render_flush_times(out, state)


def _render_open_transactions(out: list[str], state: ScrapedState | None) -> None:
    hanging, oldest_s = 0, 0.0
    transactions = None if state is None else state.transactions
    if transactions is not None and transactions.loaded:
        coordinator = transactions.coordinator
        now = coordinator.clock()
        limit = coordinator.config.transaction_max_timeout_ms
        for listed in coordinator.list_transactions(OPEN_STATES).transactions:
            md = coordinator.get(listed.transactional_id)
            if md is None or md.txn_start_timestamp < 0:
                continue
            age_ms = now - md.txn_start_timestamp
            hanging += age_ms > limit
            oldest_s = max(oldest_s, age_ms / 1000)
    name = "onceflow_transactions_hanging"
    header(out, name, "gauge", "Open transactions older than transaction.max.timeout.ms.")
    out.append(f"{name} {hanging}")
    name = "onceflow_transaction_oldest_open_age_seconds"
    header(out, name, "gauge", "Age of the oldest open transaction; 0 when none is open.")
    out.append(f"{name} {round(oldest_s, 3)}")


def _render_group_lag(out: list[str], state: ScrapedState | None) -> None:
    name = "onceflow_consumer_group_lag"
    header(out, name, "gauge", "Committed offset behind the last stable offset, per group and "
           "partition (partitions on this broker).")  # fmt: skip
    if state is None:
        return
    for group_id, group in sorted(state.group_coordinator.groups.items()):
        for tp, committed in sorted(group.offsets.committed.items()):
            log = state.logs.get_log(tp.topic, tp.partition)
            if log is None or committed.offset < 0:
                continue
            lag = max(log.last_stable_offset - committed.offset, 0)
            labels = f'group="{escape(group_id)}",{partition_labels(tp.topic, tp.partition)}'
            out.append(f"{name}{{{labels}}} {lag}")


def _render_flush_times(out: list[str], state: ScrapedState | None) -> None:
    name = "onceflow_log_flush_seconds"
    header(out, name, "histogram", "Duration of each partition log flush (fsync).")
    if state is None:
        return
    times = state.logs.committer.flush_times
    for bound, count in times.cumulative():
        le = "+Inf" if bound == float("inf") else repr(bound)
        out.append(f'{name}_bucket{{le="{le}"}} {count}')
    out.append(f"{name}_sum {round(times.total_seconds, 6)}")
    out.append(f"{name}_count {times.count}")
