"""Phase one of the exactly-once sink's two-phase commit: what a write task does.

Each task runs under the transactional id `<prefix>-<task partition>` (prefix: the
`transactional.id.prefix` option, else `onceflow-<Spark query id>`, which survives restarts
from the same checkpoint):

1. `init_transactions`: fences every earlier attempt of this task partition (a retried, replaced
   or zombie attempt, a previous run of the query) and aborts what it left open.
2. Read the task's progress marker (`onceflow.spark.markers`, OffsetFetch with requireStable).
   A marker of another query or of a later batch is an error. A marker of this batch means the
   share was committed before a restart: the task reads its rows without writing them, and
   reports `AlreadyCommitted` when they are the rows committed (same count and digest), else
   fails naming what changed.
3. Open a transaction, send the rows, add the marker with the share's fingerprint to the same
   transaction (`send_offsets_to_transaction`, while the rows are still in flight), flush, and
   return `PreparedTransaction` (transactional id, producer id, epoch) **without committing**.
   Nothing is visible to read_committed consumers yet.

A task with no rows opens no transaction, but still checks its marker: a share committed
before a restart must not vanish into other tasks. Phase two, on the driver, is in
`onceflow.spark.committer`. The records and the marker commit or abort together, so a task's
share of a batch is in the output exactly once, whichever crash happened where.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from pyspark.sql.datasource import WriterCommitMessage

from onceflow.client.admin import AdminClient
from onceflow.client.errors import KafkaError
from onceflow.client.producer import Producer
from onceflow.client.producer.states import TxnApi
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode
from onceflow.spark.faults import fault_point
from onceflow.spark.markers import (
    RowDigest,
    TaskMarker,
    check_same_share,
    check_task_marker,
    read_task_marker,
    task_group,
)
from onceflow.spark.options import SinkOptions
from onceflow.spark.pools import ProducerLease, producer_for
from onceflow.spark.rows import Delivery, non_empty, send_arrow_batch
from onceflow.spark.spool import Spool

__all__ = [
    "AlreadyCommitted",
    "NothingToCommit",
    "PreparedTransaction",
    "Settled",
    "TaskInfo",
    "TransactionTimeoutError",
    "admin_for",
    "fence",
    "read_marker",
    "marker_partition",
    "producer_config",
    "settled_marker",
    "timeout_s",
    "transaction_timeout_advice",
    "transactional_id",
    "write_share",
    "write_task",
]

log = logging.getLogger(__name__)

MARKER_PARTITION = 0
UNSTABLE_WAIT_S = 2.0  # how long an empty task waits for a pending marker before fencing


@dataclass(frozen=True)
class TaskInfo:
    """Which task this is: Spark's TaskContext, or a test's stand-in."""

    query_id: str
    batch_id: int
    partition_id: int
    attempt: int


@dataclass(frozen=True)
class PreparedTransaction(WriterCommitMessage):
    """A task's share of a batch, written in an open transaction for the driver to commit."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    batch_id: int
    partition_id: int
    records: int
    query_id: str = ""
    prefix: str | None = None
    opened_at: float = 0.0  # time.time() when the transaction's first record was sent


class TransactionTimeoutError(RuntimeError):
    """A transaction outlived `transaction.timeout.ms`: the broker aborts it."""


@dataclass(frozen=True)
class AlreadyCommitted(WriterCommitMessage):
    """A re-run task whose share of the batch was committed before (its marker says so, and
    its rows are the ones committed)."""

    transactional_id: str
    batch_id: int
    partition_id: int
    query_id: str = ""
    prefix: str | None = None


@dataclass(frozen=True)
class NothingToCommit(WriterCommitMessage):
    """An empty task, or an at_least_once task (its records are already acknowledged)."""

    partition_id: int
    records: int
    transactional_id: str | None = None
    query_id: str = ""
    prefix: str | None = None


def transactional_id(prefix: str, partition_id: int) -> str:
    return f"{prefix}-{partition_id}"


def default_prefix(query_id: str) -> str:
    return f"onceflow-{query_id}"


def producer_config(options: SinkOptions, txn_id: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {**options.client}
    if txn_id is not None:
        config["transactional.id"] = txn_id
        config["transaction.timeout.ms"] = options.transaction_timeout_ms
    return config


def timeout_s(options: SinkOptions) -> float:
    """How long one step (init, flush, commit) may wait: the transaction's own timeout."""
    return options.transaction_timeout_ms / 1000


# ---------------------------------------------------------------------------------- tasks


def write_task(
    options: SinkOptions, info: TaskInfo, prefix: str, batches: Iterable[Any]
) -> WriterCommitMessage:
    """Phase one for one task (see the module docstring)."""

    def fault(point: str) -> None:
        fault_point(
            options.faults, options.faults_dir, point, info.batch_id, info.partition_id,
            info.attempt,
        )  # fmt: skip

    fault("task.start")
    if not options.exactly_once:
        rows = non_empty(batches)
        first = next(rows, None)
        if first is None:
            return NothingToCommit(info.partition_id, 0)
        return _write_at_least_once(options, info, first, rows)
    with Spool(batches) as spool:  # all rows read before the transaction's clock starts
        if not spool.rows:
            return _empty_task(options, info, prefix)
        return write_share(options, info, prefix, spool, fault)


def write_share(
    options: SinkOptions,
    info: TaskInfo,
    prefix: str,
    spool: Iterable[Any],
    fault: Callable[[str], None] = lambda point: None,
) -> WriterCommitMessage:
    """Steps 1-3 of the module docstring for a task's rows (`spool`: non-empty record
    batches, iterated once, already read from Spark)."""
    config = producer_config(options, transactional_id(prefix, info.partition_id))
    with producer_for(config, options.reuse_clients) as lease:
        return _prepare_share(options, info, prefix, spool, fault, lease)


def _prepare_share(
    options: SinkOptions,
    info: TaskInfo,
    prefix: str,
    spool: Iterable[Any],
    fault: Callable[[str], None],
    lease: ProducerLease,
) -> WriterCommitMessage:
    """`write_share` on a producer from the worker's pool: kept for the next task only
    once its transaction is handed over to the driver."""
    producer = lease.producer
    txn_id = producer.transactional_id or ""
    timeout = timeout_s(options)
    try:
        try:
            producer.init_transactions(timeout)
        except KafkaError as exc:
            raise _init_error(exc, options, txn_id) from exc
        marker = read_marker(options, prefix, info.partition_id, timeout)
        check_task_marker(marker, info.query_id, info.batch_id, info.partition_id, prefix)
        if marker is not None and marker.batch_id == info.batch_id:
            digest = RowDigest()
            for batch in spool:  # read, do not write: compare with what was committed
                send_arrow_batch(batch, options.topic, digest.add)
            check_same_share(marker, digest, options.topic or "", info.partition_id)
            log.info("%s: batch %d already committed; writing nothing", txn_id, info.batch_id)
            return AlreadyCommitted(txn_id, info.batch_id, info.partition_id, info.query_id, prefix)
        producer.begin_transaction()
        opened_at = time.time()
        digest = RowDigest()

        def send(topic: str, value: Any, key: Any, partition: Any, headers: Any) -> None:
            digest.add(topic, value, key, partition, headers)
            producer.send(topic, value, key, partition, headers)

        for n, batch in enumerate(spool):
            send_arrow_batch(batch, options.topic, send)
            _check_age(options, txn_id, opened_at)
            if n == 0:
                if options.faults:
                    producer.flush(timeout)  # so that a crash at task.midway leaves records
                fault("task.midway")
        # the marker joins the transaction (AddOffsetsToTxn, TxnOffsetCommit) while the
        # records are still being produced, then the flush waits for the records
        marker = TaskMarker(
            info.query_id, info.batch_id, digest.rows, digest.hexdigest, options.topic or "",
            (producer.producer_id, producer.producer_epoch),
        )  # fmt: skip
        producer.send_offsets_to_transaction(
            {marker_partition(options): marker.committed()},
            task_group(prefix, info.partition_id),
            timeout,
        )
        producer.flush(timeout)
        _raise_if_abortable(producer)
        _check_age(options, txn_id, opened_at)
        fault("task.prepared")
        prepared = PreparedTransaction(
            txn_id, producer.producer_id, producer.producer_epoch, info.batch_id,
            info.partition_id, digest.rows, info.query_id, prefix, opened_at,
        )  # fmt: skip
        producer.hand_over_transaction()  # the driver ends it; the next task fences it
        lease.keep()
        return prepared
    except BaseException:
        _abort_quietly(producer)
        raise


def transaction_timeout_advice(options: SinkOptions) -> str:
    return (
        f"Raise the sink option kafka.transaction.timeout.ms (now "
        f"{options.transaction_timeout_ms}), up to the broker's transaction.max.timeout.ms "
        "(900000 by default; the broker refuses more), or make batches smaller "
        "(maxOffsetsPerTrigger) or with fewer task waves (more executor cores)."
    )


def _check_age(options: SinkOptions, txn_id: str, opened_at: float) -> None:
    """Fail fast once the transaction is older than its timeout: the broker aborts it, and
    every retry of a task this slow would fail the same way."""
    age = time.time() - opened_at
    if age * 1000 > options.transaction_timeout_ms:
        raise TransactionTimeoutError(
            f"{txn_id}: the task's transaction has been open for {age:.1f} s, longer than "
            f"kafka.transaction.timeout.ms={options.transaction_timeout_ms}: the broker "
            "aborts it. A task must send its share and the driver commit the batch within "
            f"that time. {transaction_timeout_advice(options)}"
        )


def _empty_task(options: SinkOptions, info: TaskInfo, prefix: str) -> NothingToCommit:
    """A task without rows opens no transaction, but its marker must not say that it
    committed rows in this batch before a restart: they would now be in other tasks."""
    marker = settled_marker(options, prefix, info.partition_id).marker
    check_task_marker(marker, info.query_id, info.batch_id, info.partition_id, prefix)
    if marker is not None and marker.batch_id == info.batch_id:
        check_same_share(marker, RowDigest(), options.topic or "", info.partition_id)
    return NothingToCommit(info.partition_id, 0, None, info.query_id, prefix)


def _write_at_least_once(
    options: SinkOptions, info: TaskInfo, first: Any, rows: Iterator[Any]
) -> NothingToCommit:
    """deliveryGuarantee=at_least_once: an idempotent producer, flushed before returning."""
    timeout = timeout_s(options)
    delivery = Delivery()
    with producer_for(producer_config(options, None), options.reuse_clients) as lease:
        producer = lease.producer

        def send(topic: str, value: Any, key: Any, partition: Any, headers: Any) -> None:
            producer.send(topic, value, key, partition, headers, on_delivery=delivery)

        count = send_arrow_batch(first, options.topic, send)
        for batch in rows:
            count += send_arrow_batch(batch, options.topic, send)
        producer.flush(timeout)
        delivery.check()
        lease.keep()
    return NothingToCommit(info.partition_id, count)


def marker_partition(options: SinkOptions) -> tuple[str, int]:
    """Where progress markers are committed: partition 0 of the `topic` option or of
    `progressTopic` (Kafka accepts offsets only for an existing partition)."""
    topic = options.progress_topic or options.topic
    if topic is None:  # checked when the query starts; kept for direct callers
        raise ValueError("the exactly-once sink needs the 'topic' or 'progressTopic' option")
    return (topic, MARKER_PARTITION)


_admins: dict[tuple[tuple[str, str], ...], AdminClient] = {}  # per worker process


def admin_for(options: SinkOptions) -> AdminClient:
    """An AdminClient kept for the life of the Python worker: Spark reuses workers across
    batches, so the connection and the coordinator lookup are paid once, not per task."""
    key = tuple(sorted(options.client.items()))
    admin = _admins.get(key)
    if admin is None:
        admin = _admins[key] = AdminClient(options.client)
    return admin


def read_marker(
    options: SinkOptions, prefix: str, partition_id: int, timeout: float, stable: bool = True
) -> TaskMarker | None:
    """The task partition's marker (`markers.read_task_marker`), on this worker's admin."""
    where = TopicPartition(*marker_partition(options))
    admin = admin_for(options)
    try:
        return read_task_marker(admin, prefix, partition_id, where, timeout, stable)
    except (OSError, KafkaError) as exc:  # a connection kept from an earlier batch may be stale
        if isinstance(exc, KafkaError) and exc.code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
            raise
        admin.close()
        return read_task_marker(admin, prefix, partition_id, where, timeout, stable)


class Settled(NamedTuple):
    marker: TaskMarker | None
    was_open: bool  # a transaction held a marker pending, and was aborted


def settled_marker(options: SinkOptions, prefix: str, partition_id: int) -> Settled:
    """The task partition's marker, without an InitProducerId when no transaction holds one
    pending; when one does (an attempt or a run that died with its share prepared), the
    transactional id is fenced first, which aborts it."""
    try:
        return Settled(read_marker(options, prefix, partition_id, UNSTABLE_WAIT_S), False)
    except KafkaError as exc:
        if exc.code != ErrorCode.UNSTABLE_OFFSET_COMMIT:
            raise
    fence(options, transactional_id(prefix, partition_id))
    return Settled(read_marker(options, prefix, partition_id, timeout_s(options)), True)


def fence(options: SinkOptions, txn_id: str) -> None:
    """InitProducerId on `txn_id`: a new epoch, and whatever transaction it left open aborted.
    Failures are logged: the transaction then ends by its timeout."""
    producer = Producer(producer_config(options, txn_id))
    try:
        producer.init_transactions(timeout_s(options))
    except KafkaError as exc:
        log.warning("could not abort the transaction of %s: %s", txn_id, exc)
    finally:
        producer.close(timeout=0)


def _init_error(exc: KafkaError, options: SinkOptions, txn_id: str) -> BaseException:
    if exc.code == ErrorCode.INVALID_TRANSACTION_TIMEOUT:
        return RuntimeError(
            f"The broker refused transaction.timeout.ms={options.transaction_timeout_ms} for "
            f"{txn_id}: it is above the broker's transaction.max.timeout.ms. Lower the sink "
            "option kafka.transaction.timeout.ms, or raise the broker setting."
        )
    return exc


def _raise_if_abortable(producer: Producer) -> None:
    """A record the broker refused makes the transaction abortable (no per-record callbacks
    needed): raise its error, as `commit_transaction` would, instead of preparing."""
    if isinstance(producer.txn, TxnManager):  # always, for the sink's transactional producer
        producer.txn.check_call(TxnApi.COMMIT_TRANSACTION)


def _abort_quietly(producer: Producer) -> None:
    """A failing task aborts its own transaction, so it does not pin the last stable offset
    until the timeout (if it cannot, the next attempt's InitProducerId aborts it)."""
    try:
        if producer.txn is not None and producer.txn.state.name in (
            "IN_TRANSACTION",
            "ABORTABLE_ERROR",
        ):
            producer.abort_transaction(5)
    except Exception as exc:  # noqa: BLE001 - best effort; the original error matters
        log.warning("could not abort %s: %s", producer.transactional_id, exc)


def query_id_from_checkpoint(checkpoint_location: str | None) -> str | None:
    """The query id Spark keeps in `<checkpoint>/metadata` (local file systems only)."""
    if not checkpoint_location:
        return None
    path = checkpoint_location.removeprefix("file:")
    try:
        query_id = json.loads((Path(path) / "metadata").read_text())["id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return query_id if isinstance(query_id, str) else None
