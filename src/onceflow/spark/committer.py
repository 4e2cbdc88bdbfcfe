"""Phase two of the exactly-once sink's two-phase commit: what the Spark driver does.

`commit_batch` runs once Spark has decided a micro-batch. Before committing anything it checks
the query marker (`onceflow.spark.markers`): this query's, on the marker partition in use, at
the batch before this one; and it settles the task ids beyond the batch's task count (a run
with more tasks may have left their transactions open, or committed their shares). Then every
prepared transaction is committed, in parallel, with `Producer.resume_transaction(id, epoch)`
and EndTxn, which is idempotent (a transaction already committed with that id and epoch
answers success); a commit that fails is resolved (committed, still open, aborted or unknown:
`onceflow.spark.outcome`) before it is reported; last, the query marker moves to this batch.
`abort_batch` aborts what a failed batch left open by running InitProducerId on every task
partition's transactional id.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from onceflow.client.admin import OffsetSpec
from onceflow.client.errors import IllegalStateError, KafkaError
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition
from onceflow.spark.faults import fault_point
from onceflow.spark.markers import (
    MarkerError,
    QueryMarker,
    check_query_marker,
    read_query_marker,
    write_query_marker,
)
from onceflow.spark.metrics import recorder
from onceflow.spark.options import SinkOptions
from onceflow.spark.outcome import CommitOutcome, resolve_commit
from onceflow.spark.twophase import (
    PreparedTransaction,
    admin_for,
    fence,
    marker_partition,
    producer_config,
    read_marker,
    settled_marker,
    timeout_s,
    transaction_timeout_advice,
    transactional_id,
)

__all__ = ["SinkCommitError", "abort_batch", "commit_batch"]

log = logging.getLogger(__name__)

COMMIT_THREADS = 8
COMMITTERS_KEPT = 32  # committing producers a driver worker keeps between batches


class SinkCommitError(RuntimeError):
    """The driver could not commit a prepared transaction: its share is not in the output
    (aborted), or whether it is could not be learned (the message says which). Either way the
    query restarts from its checkpoint, and the markers make the re-run write it once."""


def commit_batch(
    options: SinkOptions, messages: Sequence[Any], batch_id: int, streaming: bool = True
) -> None:
    """Phase two: commit every prepared transaction of the batch (idempotent, so Spark may
    call it again for the same batch after a driver restart). A batch job (`streaming`
    false) is never replayed and keeps no query marker."""
    fault_point(options.faults, options.faults_dir, "driver.before_commit", batch_id)
    started = time.monotonic()
    missing = [i for i, m in enumerate(messages) if m is None]
    if missing:
        raise SinkCommitError(f"batch {batch_id}: no commit message from tasks {missing}")
    prepared = [m for m in messages if isinstance(m, PreparedTransaction)]
    ledger = _QueryLedger.of(options, messages) if streaming else None
    committed = 0
    if ledger is None or ledger.before_commit(batch_id, messages):
        _commit_all(options, prepared, batch_id)
        committed = len(prepared)
        if ledger is not None:
            ledger.after_commit(batch_id, len(messages))
    _record_commit(options, messages, batch_id, committed, time.monotonic() - started)
    fault_point(options.faults, options.faults_dir, "driver.after_commit", batch_id)


def _prefix_label(options: SinkOptions, messages: Sequence[Any]) -> dict[str, str]:
    prefix = next((m.prefix for m in messages if getattr(m, "prefix", None)), None)
    return {"prefix": prefix or options.transactional_id_prefix or ""}


def _record_commit(
    options: SinkOptions, messages: Sequence[Any], batch_id: int, committed: int, seconds: float
) -> None:
    """The batch's figures for the driver's Prometheus endpoint (`metricsPort`), with the
    output's LSO lag (the `topic` option's partitions) measured after the commit."""
    metrics = recorder(options.metrics_port)
    if metrics is None:
        return
    labels = _prefix_label(options, messages)
    metrics.add("onceflow_spark_sink_transactions_committed_total", labels, committed)
    metrics.add("onceflow_spark_sink_batches_committed_total", labels, 1)
    metrics.set("onceflow_spark_sink_last_committed_batch", labels, batch_id)
    metrics.add("onceflow_spark_sink_commit_seconds_sum", labels, seconds)
    metrics.set("onceflow_spark_sink_last_commit_seconds", labels, seconds)
    if options.topic is not None:
        try:
            for tp, lag in _lso_lag(options, options.topic).items():
                labels = {"topic": tp.topic, "partition": str(tp.partition)}
                metrics.set("onceflow_spark_sink_output_lso_lag", labels, lag)
        except (OSError, KafkaError) as exc:  # a figure is never worth failing a batch
            log.warning("could not measure the LSO lag of %s: %s", options.topic, exc)
    metrics.flush()


def _lso_lag(options: SinkOptions, topic: str) -> dict[TopicPartition, int]:
    """High watermark minus last stable offset of each partition of `topic`."""
    admin = admin_for(options)
    described = admin.describe_topics([topic])[topic]
    specs = {TopicPartition(topic, p.partition): OffsetSpec.latest() for p in described.partitions}
    high = admin.list_offsets(specs, isolation_level=0)
    stable = admin.list_offsets(specs, isolation_level=1)
    return {tp: max(high[tp].offset - stable[tp].offset, 0) for tp in specs}


def _record_aborted(options: SinkOptions, prefix: str | None, count: int) -> None:
    metrics = recorder(options.metrics_port)
    if metrics is not None:
        labels = {"prefix": prefix or options.transactional_id_prefix or ""}
        metrics.add("onceflow_spark_sink_transactions_aborted_total", labels, count)
        metrics.flush()


class _QueryLedger:
    """The driver's side of the markers for one query: the query marker and the task ids
    beyond a batch's task count."""

    def __init__(self, options: SinkOptions, prefix: str, query_id: str) -> None:
        self.options = options
        self.prefix = prefix
        self.query_id = query_id
        self.where = TopicPartition(*marker_partition(options))
        self.timeout = timeout_s(options)

    @classmethod
    def of(cls, options: SinkOptions, messages: Sequence[Any]) -> _QueryLedger | None:
        if not options.exactly_once:
            return None
        for message in messages:
            prefix = getattr(message, "prefix", None)
            if prefix is not None:
                return cls(options, prefix, message.query_id)
        return None

    def before_commit(self, batch_id: int, messages: Sequence[Any]) -> bool:
        """Check the query marker against the batch; False when every share of the batch was
        committed before a restart (nothing to commit)."""
        admin = admin_for(self.options)
        found = read_query_marker(admin, self.prefix, self.timeout)
        check_query_marker(
            found, self.where, self.query_id, batch_id, self.prefix,
            self.options.recreate_markers_at_batch,
        )  # fmt: skip
        tasks = len(messages)
        known = found[1] if found else QueryMarker(self.query_id, batch_id - 1, 0)
        if known.batch_id == batch_id:
            self._check_committed_replay(known, batch_id, messages)
            return False
        self._settle_beyond(tasks, known.tasks, batch_id)
        if tasks > known.tasks:  # before any share commits: ids below `tasks` may hold one
            marker = QueryMarker(self.query_id, known.batch_id, tasks)
            write_query_marker(admin, self.prefix, self.where, marker, self.timeout)
        return True

    def after_commit(self, batch_id: int, tasks: int) -> None:
        """Every share is committed: the query marker moves to this batch (and is refreshed,
        so it does not expire while the query keeps committing batches)."""
        marker = QueryMarker(self.query_id, batch_id, tasks)
        write_query_marker(admin_for(self.options), self.prefix, self.where, marker, self.timeout)

    def _check_committed_replay(
        self, known: QueryMarker, batch_id: int, messages: Sequence[Any]
    ) -> None:
        rewritten = [
            m.partition_id
            for m in messages
            if isinstance(m, PreparedTransaction) and not self._is_committed(m)
        ]
        if known.tasks == len(messages) and not rewritten:
            return
        raise MarkerError(
            f"batch {batch_id} of query {self.query_id} was committed in full by "
            f"{known.tasks} task partitions before the restart, but the re-run has "
            f"{len(messages)} task partitions and task partitions {rewritten} found no "
            "marker for their share: the task layout changed between the crash and the "
            "restart (minPartitions, maxRecordsPerPartition, the input partitions, "
            "spark.sql.shuffle.partitions, the code), or their markers were deleted. Restart "
            f"with the settings batch {batch_id} was first run with (docs/spark.md, 'When "
            "the sink refuses a replay')."
        )

    def _is_committed(self, message: PreparedTransaction) -> bool:
        """Whether the marker of the message's task says that this very transaction
        committed (Spark called commit twice with the same messages). Not requireStable:
        a re-run task's own transaction, prepared and open, holds a marker pending."""
        marker = read_marker(
            self.options, self.prefix, message.partition_id, self.timeout, stable=False
        )
        return (
            marker is not None
            and marker.batch_id == message.batch_id
            and marker.producer == (message.producer_id, message.producer_epoch)
        )

    def _settle_beyond(self, tasks: int, known_tasks: int, batch_id: int) -> None:
        """Task ids from `tasks` up: abort their open transactions (a run with more tasks
        died with them prepared; they pin the output's last stable offset), and fail when one
        committed its share of this batch (its rows are in this batch's other tasks now).
        Ids below `known_tasks` are all checked; above, until one has nothing open."""
        partition = tasks
        while True:
            opened = settled_marker(self.options, self.prefix, partition)
            marker = opened.marker
            if marker is not None and marker.query_id == self.query_id:
                if marker.batch_id == batch_id:
                    raise MarkerError(
                        f"task partition {partition} committed its share of batch {batch_id} "
                        f"before the restart, but the re-run has only {tasks} task "
                        "partitions: its rows are now in other tasks. The task layout changed "
                        "between the crash and the restart; restart with the settings batch "
                        f"{batch_id} was first run with (docs/spark.md, 'When the sink "
                        "refuses a replay')."
                    )
            if partition >= known_tasks and not opened.was_open:
                return
            partition += 1


def _commit_all(
    options: SinkOptions, prepared: Sequence[PreparedTransaction], batch_id: int
) -> None:
    """Commit the prepared transactions in parallel. With fault injection on, the others
    wait for the first one's commit and then pass the `driver.between_commits` point, so a
    crash there leaves the pool with some transactions committed and some not."""
    if not prepared:
        return
    first_done = threading.Event()

    def commit(message: PreparedTransaction) -> None:
        if message is not prepared[0] and options.faults:
            first_done.wait()
            fault_point(
                options.faults, options.faults_dir, "driver.between_commits", batch_id,
                message.partition_id,
            )  # fmt: skip
        try:
            _commit_one(options, message)
        finally:
            if message is prepared[0]:
                first_done.set()

    with ThreadPoolExecutor(min(len(prepared), COMMIT_THREADS)) as pool:
        list(pool.map(commit, prepared))
    if len(prepared) == 1 and options.faults:  # no other commit to stop before: stop after it
        fault_point(options.faults, options.faults_dir, "driver.between_commits", batch_id)


class _Committers:
    """The driver's committing producers, one per transactional id, kept between batches
    (Spark's Python workers live on): a batch's commit is then one EndTxn round trip per task
    partition instead of a new producer, connection and coordinator lookup each. At most
    `size` are kept (least recently used closed first); one that failed is closed."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.idle: OrderedDict[tuple[Any, ...], Producer] = OrderedDict()

    def take(self, options: SinkOptions, txn_id: str) -> tuple[tuple[Any, ...], Producer]:
        key = (txn_id, *sorted(options.client.items()))
        with self.lock:
            producer = self.idle.pop(key, None)
        return key, producer or Producer(producer_config(options, txn_id))

    def give_back(self, key: tuple[Any, ...], producer: Producer) -> None:
        with self.lock:
            self.idle[key] = producer
            evicted = self.idle.popitem(last=False)[1] if len(self.idle) > self.size else None
        if evicted is not None:
            evicted.close(timeout=0)

    def clear(self) -> None:
        """Close every kept producer."""
        with self.lock:
            idle, self.idle = self.idle, OrderedDict()
        for producer in idle.values():
            producer.close(timeout=0)


_committers = _Committers(COMMITTERS_KEPT)


def _commit_one(options: SinkOptions, message: PreparedTransaction, retry: bool = True) -> None:
    """Commit one prepared transaction; when that fails, learn what became of it
    (`outcome.resolve_commit`) before reporting: committed is success, still open is
    committed again (once), aborted or unknown is a `SinkCommitError` that says which."""
    key, producer = _committers.take(options, message.transactional_id)
    try:
        try:
            producer.resume_transaction(message.producer_id, message.producer_epoch)
        except IllegalStateError:  # a kept producer that cannot resume: start afresh
            producer.close(timeout=0)
            producer = Producer(producer_config(options, message.transactional_id))
            producer.resume_transaction(message.producer_id, message.producer_epoch)
        producer.commit_transaction(timeout_s(options))
        _committers.give_back(key, producer)
    except BaseException as exc:
        producer.close(timeout=0)
        if not isinstance(exc, (KafkaError, OSError)):  # KafkaError, timeouts, lost connections
            raise
        outcome = resolve_commit(options, message)
        log.warning("%s: the commit failed (%s); the transaction is %s",
                    message.transactional_id, exc, outcome.value)  # fmt: skip
        if outcome is CommitOutcome.COMMITTED:
            return
        if outcome is CommitOutcome.OPEN and retry:
            _commit_one(options, message, retry=False)
            return
        if outcome is CommitOutcome.ABORTED:
            _record_aborted(options, message.prefix, 1)
        raise SinkCommitError(_failed_commit(options, message, exc, outcome)) from exc


def _failed_commit(
    options: SinkOptions, message: PreparedTransaction, exc: BaseException, outcome: CommitOutcome
) -> str:
    what = (
        f"batch {message.batch_id}: could not commit the transaction of task partition "
        f"{message.partition_id} ({message.transactional_id}, producer id "
        f"{message.producer_id}, epoch {message.producer_epoch}): {exc}."
    )
    if outcome is CommitOutcome.UNKNOWN:
        return (
            f"{what} Whether it committed could not be learned (neither its progress marker "
            "nor the transaction coordinator answered), so its rows may or may not be in the "
            "output. Do not write them again by hand: restart the query from its checkpoint. "
            "The re-run task reads its marker and writes the share only if it was not "
            "committed, exactly once. `onceflow transactions describe --transactional-id "
            f"{message.transactional_id}` shows the transaction's state."
        )
    return (
        f"{what} {_why_ended(options, message)} Its rows are not in the output and the query "
        "stops; restart the query from its checkpoint to write the batch again, exactly "
        "once."
    )


def _why_ended(options: SinkOptions, message: PreparedTransaction) -> str:
    """Why the broker had ended a prepared transaction before the driver committed it."""
    age = time.time() - message.opened_at
    if message.opened_at and age * 1000 > options.transaction_timeout_ms:
        return (
            f"The transaction was open for {age:.0f} s (the executor's clock), longer than "
            f"kafka.transaction.timeout.ms={options.transaction_timeout_ms}, and the broker "
            "aborted it: a micro-batch, from its first task's first record to the driver's "
            f"commit, must fit in that time. {transaction_timeout_advice(options)}"
        )
    return (
        "The broker had already ended it: a later attempt of the same task started after "
        "Spark accepted this one (an executor was lost and its task re-run, a stage was "
        "re-attempted) and fenced it, or another writer uses the same transactional id."
    )


def abort_batch(
    options: SinkOptions, messages: Sequence[Any], batch_id: int, prefix: str | None
) -> None:
    """Spark gave the batch up: abort every transaction its tasks may have left open, by
    InitProducerId on each task partition's transactional id (that also fences an attempt
    still running). `prefix` names the ids of tasks that returned no message."""
    ids = set()
    for i, message in enumerate(messages):
        txn_id = getattr(message, "transactional_id", None)
        if txn_id is None and prefix is not None:
            txn_id = transactional_id(prefix, i)
        if txn_id is not None:
            ids.add(txn_id)
    if not options.exactly_once or not ids:
        if options.exactly_once and messages:
            log.warning(
                "batch %d aborted; its tasks' transactional ids are unknown here, so open "
                "transactions end by transaction.timeout.ms or when the query restarts",
                batch_id,
            )
        return
    with ThreadPoolExecutor(min(len(ids), COMMIT_THREADS)) as pool:
        list(pool.map(lambda txn_id: fence(options, txn_id), sorted(ids)))
    _record_aborted(options, prefix, len(ids))
