"""The exactly-once sink's two-phase commit between write tasks and the Spark driver.

Phase one runs in each write task (`write_task`), under the transactional id
`<prefix>-<task partition>` (prefix: the `transactional.id.prefix` option, else
`onceflow-<Spark query id>`, which survives restarts from the same checkpoint):

1. `init_transactions`: fences every earlier attempt of this task partition (a retried, replaced
   or zombie attempt, a previous run of the query) and aborts what it left open.
2. Read the task's progress marker: the offset the consumer group `<transactional id>` has
   committed on partition 0 of the marker topic (OffsetFetch with requireStable). The marker is
   `batch id + 1` of the last batch whose share this task partition committed. If it already
   covers this batch, the task writes nothing (`AlreadyCommitted`): a batch re-run after a
   driver crash leaves committed shares alone.
3. Open a transaction, send the rows, add the marker `batch id + 1` to the same transaction
   (`send_offsets_to_transaction`, while the rows are still in flight), flush, and return
   `PreparedTransaction` (transactional id, producer id, epoch) **without committing**.
   Nothing is visible to read_committed consumers yet.

Phase two runs on the driver once Spark has decided the batch (`commit_batch`): every
prepared transaction is committed with `Producer.resume_transaction(id, epoch)` and EndTxn,
which is idempotent (a transaction already committed with that id and epoch answers success).
`abort_batch` aborts what a failed batch left open by running InitProducerId on every task
partition's transactional id. The records and the marker commit or abort together, so a task's
share of a batch is in the output exactly once, whichever crash happened where.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from onceflow.client.admin import AdminClient, TopicPartition
from onceflow.client.errors import IllegalStateError, KafkaError, ProducerFencedError
from onceflow.client.offsets import OffsetAndMetadata
from onceflow.client.producer import Producer
from onceflow.client.producer.txn.states import TxnApi
from onceflow.protocol.errors import ErrorCode
from onceflow.spark.faults import fault_point
from onceflow.spark.options import SinkOptions

__all__ = [
    "AlreadyCommitted",
    "NothingToCommit",
    "PreparedTransaction",
    "TaskInfo",
    "abort_batch",
    "commit_batch",
    "write_task",
]

log = logging.getLogger(__name__)

MARKER_PARTITION = 0
MARKER_METADATA = "onceflow spark sink: batch {batch}"
COMMIT_THREADS = 8
COMMITTERS_KEPT = 32  # committing producers a driver worker keeps between batches


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


@dataclass(frozen=True)
class AlreadyCommitted(WriterCommitMessage):
    """A re-run task whose share of the batch was committed before (its marker says so)."""

    transactional_id: str
    batch_id: int
    partition_id: int


@dataclass(frozen=True)
class NothingToCommit(WriterCommitMessage):
    """An empty task, or an at_least_once task (its records are already acknowledged)."""

    partition_id: int
    records: int
    transactional_id: str | None = None


class SinkCommitError(RuntimeError):
    """The driver could not commit a prepared transaction; the batch's share is not in the
    output, and the query must restart from its checkpoint to write it again."""


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


def _timeout_s(options: SinkOptions) -> float:
    """How long one step (init, flush, commit) may wait: the transaction's own timeout."""
    return options.transaction_timeout_ms / 1000


# ---------------------------------------------------------------------------------- rows


RowSink = Any  # a callable send(topic, value, key, partition, headers)


def send_arrow_batch(batch: Any, default_topic: str | None, send: RowSink) -> int:
    """Send every row of an Arrow record batch with Spark's Kafka sink columns."""
    names = batch.schema.names
    n = batch.num_rows
    values = batch.column(names.index("value")).to_pylist()
    keys = batch.column(names.index("key")).to_pylist() if "key" in names else [None] * n
    if "topic" in names:
        topics = batch.column(names.index("topic")).to_pylist()
    else:
        topics = [default_topic] * n
    if default_topic is not None and "topic" in names:
        topics = [default_topic] * n  # the option overrides the column, as in Spark
    partitions = (
        batch.column(names.index("partition")).to_pylist() if "partition" in names else [None] * n
    )
    if "headers" in names:
        headers = [
            [(h["key"], h["value"]) for h in row] if row else None
            for row in batch.column(names.index("headers")).to_pylist()
        ]
    else:
        headers = [None] * n
    for topic, value, key, partition, row_headers in zip(
        topics, values, keys, partitions, headers, strict=True
    ):
        if topic is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        send(topic, value, key, partition, row_headers)
    return n


def _non_empty(batches: Iterable[Any]) -> Iterator[Any]:
    return (b for b in batches if b.num_rows)


class _Delivery:
    """Collects the first delivery failure of a task's records."""

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def __call__(self, error: Any, _metadata: Any) -> None:
        if error is not None and self.error is None:
            self.error = error

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"a record could not be written: {self.error}") from self.error


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
    rows = _non_empty(batches)
    first = next(rows, None)
    if first is None:
        return NothingToCommit(info.partition_id, 0)
    if not options.exactly_once:
        return _write_at_least_once(options, info, first, rows)
    txn_id = transactional_id(prefix, info.partition_id)
    timeout = _timeout_s(options)
    producer = Producer(producer_config(options, txn_id))
    try:
        try:
            producer.init_transactions(timeout)
        except KafkaError as exc:
            raise _init_error(exc, options, txn_id) from exc
        if _already_committed(options, txn_id, info.batch_id, timeout):
            log.info("%s: batch %d already committed; writing nothing", txn_id, info.batch_id)
            return AlreadyCommitted(txn_id, info.batch_id, info.partition_id)
        producer.begin_transaction()
        count = send_arrow_batch(first, options.topic, producer.send)
        if options.faults:
            producer.flush(timeout)  # so that a crash at task.midway leaves records behind
        fault("task.midway")
        for batch in rows:
            count += send_arrow_batch(batch, options.topic, producer.send)
        # the marker joins the transaction (AddOffsetsToTxn, TxnOffsetCommit) while the
        # records are still being produced, then the flush waits for the records
        marker = OffsetAndMetadata(info.batch_id + 1, MARKER_METADATA.format(batch=info.batch_id))
        producer.send_offsets_to_transaction({marker_partition(options): marker}, txn_id, timeout)
        producer.flush(timeout)
        _raise_if_abortable(producer)
        fault("task.prepared")
        return PreparedTransaction(
            txn_id, producer.producer_id, producer.producer_epoch, info.batch_id,
            info.partition_id, count,
        )  # fmt: skip
    except BaseException:
        _abort_quietly(producer)
        raise
    finally:
        producer.close(timeout=0)


def _write_at_least_once(
    options: SinkOptions, info: TaskInfo, first: Any, rows: Iterator[Any]
) -> NothingToCommit:
    """deliveryGuarantee=at_least_once: an idempotent producer, flushed before returning."""
    timeout = _timeout_s(options)
    delivery = _Delivery()
    with Producer(producer_config(options, None)) as producer:

        def send(topic: str, value: Any, key: Any, partition: Any, headers: Any) -> None:
            producer.send(topic, value, key, partition, headers, on_delivery=delivery)

        count = send_arrow_batch(first, options.topic, send)
        for batch in rows:
            count += send_arrow_batch(batch, options.topic, send)
        producer.flush(timeout)
        delivery.check()
    return NothingToCommit(info.partition_id, count)


def marker_partition(options: SinkOptions) -> tuple[str, int]:
    """Where progress markers are committed: partition 0 of the `topic` option or of
    `progressTopic` (Kafka accepts offsets only for an existing partition)."""
    topic = options.progress_topic or options.topic
    if topic is None:  # checked when the query starts; kept for direct callers
        raise ValueError("the exactly-once sink needs the 'topic' or 'progressTopic' option")
    return (topic, MARKER_PARTITION)


_admins: dict[tuple[tuple[str, str], ...], AdminClient] = {}  # per worker process


def _admin(options: SinkOptions) -> AdminClient:
    """An AdminClient kept for the life of the Python worker: Spark reuses workers across
    batches, so the connection and the coordinator lookup are paid once, not per task."""
    key = tuple(sorted(options.client.items()))
    admin = _admins.get(key)
    if admin is None:
        admin = _admins[key] = AdminClient(options.client)
    return admin


def _already_committed(options: SinkOptions, txn_id: str, batch_id: int, timeout: float) -> bool:
    topic, partition = marker_partition(options)
    tp = TopicPartition(topic, partition)
    admin = _admin(options)
    try:
        committed = admin.list_consumer_group_offsets(
            txn_id, [tp], require_stable=True, timeout=timeout
        )
    except (OSError, KafkaError):  # a connection kept from an earlier batch may be stale
        admin.close()
        committed = admin.list_consumer_group_offsets(
            txn_id, [tp], require_stable=True, timeout=timeout
        )
    marker = committed.get(tp)
    return marker is not None and marker[0] >= batch_id + 1


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
    if producer.txn is not None:
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


# ---------------------------------------------------------------------------------- driver


def commit_batch(options: SinkOptions, messages: Sequence[Any], batch_id: int) -> None:
    """Phase two: commit every prepared transaction of the batch (idempotent, so Spark may
    call it again for the same batch after a driver restart)."""
    fault_point(options.faults, options.faults_dir, "driver.before_commit", batch_id)
    missing = [i for i, m in enumerate(messages) if m is None]
    if missing:
        raise SinkCommitError(f"batch {batch_id}: no commit message from tasks {missing}")
    prepared = [m for m in messages if isinstance(m, PreparedTransaction)]
    if not prepared:
        return
    rest = prepared
    if options.faults:  # commit one alone first, so a fault can fall between two commits
        _commit_one(options, prepared[0])
        fault_point(options.faults, options.faults_dir, "driver.between_commits", batch_id)
        rest = prepared[1:]
    if rest:
        with ThreadPoolExecutor(min(len(rest), COMMIT_THREADS)) as pool:
            list(pool.map(lambda m: _commit_one(options, m), rest))
    fault_point(options.faults, options.faults_dir, "driver.after_commit", batch_id)


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


_committers = _Committers(COMMITTERS_KEPT)


def _commit_one(options: SinkOptions, message: PreparedTransaction) -> None:
    key, producer = _committers.take(options, message.transactional_id)
    try:
        try:
            producer.resume_transaction(message.producer_id, message.producer_epoch)
        except IllegalStateError:  # a kept producer that cannot resume: start afresh
            producer.close(timeout=0)
            producer = Producer(producer_config(options, message.transactional_id))
            producer.resume_transaction(message.producer_id, message.producer_epoch)
        producer.commit_transaction(_timeout_s(options))
        _committers.give_back(key, producer)
    except BaseException as exc:
        producer.close(timeout=0)
        if not isinstance(exc, (ProducerFencedError, KafkaError)):
            raise
        raise SinkCommitError(
            f"batch {message.batch_id}: could not commit the transaction of task partition "
            f"{message.partition_id} ({message.transactional_id}, producer id "
            f"{message.producer_id}, epoch {message.producer_epoch}): {exc}. It was aborted "
            "before the driver committed it: the transaction took longer than the sink's "
            "kafka.transaction.timeout.ms, or another writer uses the same transactional id. "
            "Its records are not in the output; restart the query from its checkpoint to "
            "write the batch again."
        ) from exc


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
        list(pool.map(lambda txn_id: _fence(options, txn_id), sorted(ids)))


def _fence(options: SinkOptions, txn_id: str) -> None:
    producer = Producer(producer_config(options, txn_id))
    try:
        producer.init_transactions(_timeout_s(options))
    except KafkaError as exc:
        log.warning("could not abort the transaction of %s: %s", txn_id, exc)
    finally:
        producer.close(timeout=0)


def query_id_from_checkpoint(checkpoint_location: str | None) -> str | None:
    """The query id Spark keeps in `<checkpoint>/metadata` (local file systems only)."""
    if not checkpoint_location:
        return None
    path = checkpoint_location.removeprefix("file:")
    try:
        return json.loads((Path(path) / "metadata").read_text())["id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
