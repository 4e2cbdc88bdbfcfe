"""The sink: Spark's Kafka sink columns, written exactly once (or at least once).

Columns as Spark's Kafka sink: `value` (binary or string, required), `key` (binary or
string), `topic` (string; the `topic` option overrides it), `partition` (int), `headers`
(array<struct<key: string, value: binary>>); other columns are ignored. A wrong or missing
column fails the query when it starts.

`KafkaStreamWriter` (streaming) and `KafkaBatchWriter` (batch) are Arrow writers: each task
gets `pyarrow.RecordBatch`es. The protocol itself is in `twophase` (tasks), `committer`
(driver) and `markers`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from onceflow.spark.committer import abort_batch, commit_batch
from onceflow.spark.markers import MarkerError
from onceflow.spark.options import OptionError, SinkOptions
from onceflow.spark.twophase import (
    TaskInfo,
    default_prefix,
    query_id_from_checkpoint,
    write_task,
)

__all__ = ["KafkaBatchWriter", "KafkaStreamWriter", "validate_sink_schema"]

_HEADERS = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


def validate_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Raise `OptionError` unless the DataFrame has Spark's Kafka sink columns."""
    fields = {f.name: f.dataType for f in schema.fields}
    allowed = {
        "value": (BinaryType(), StringType()),
        "key": (BinaryType(), StringType()),
        "topic": (StringType(),),
        "partition": (IntegerType(),),
    }
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found in the sink's input")
    for name, types in allowed.items():
        if name in fields and fields[name] not in types:
            kinds = " or ".join(t.simpleString() for t in types)
            raise OptionError(
                f"{name} attribute type must be {kinds}, not {fields[name].simpleString()}"
            )
    if "headers" in fields and not _headers_type_ok(fields["headers"]):
        raise OptionError(
            "headers attribute type must be array<struct<key:string,value:binary>>, not "
            f"{fields['headers'].simpleString()}"
        )
    if options.topic is None and "topic" not in fields:
        raise OptionError(
            "topic option required when no 'topic' attribute is present. Use the topic "
            "option for setting a topic."
        )
    if options.exactly_once and options.topic is None and options.progress_topic is None:
        raise OptionError(
            "deliveryGuarantee=exactly_once with a 'topic' column needs the 'topic' or the "
            "'progressTopic' option: the sink commits its progress markers to partition 0 of "
            "that (existing) topic"
        )


def _headers_type_ok(data_type: Any) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    inner = {f.name: f.dataType for f in data_type.elementType.fields}
    return inner.get("key") == StringType() and inner.get("value") == BinaryType()


def _task_info(batch_id: int | None = None) -> TaskInfo:
    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("the onceflow sink's write() must run inside a Spark task")
    if batch_id is None:
        property_ = ctx.getLocalProperty("streaming.sql.batchId")
        if property_ is None:
            raise RuntimeError("no streaming batch id in the task (not a streaming query?)")
        batch_id = int(property_)
    return TaskInfo(
        query_id=ctx.getLocalProperty("sql.streaming.queryId") or "",
        batch_id=batch_id,
        partition_id=ctx.partitionId(),
        attempt=ctx.attemptNumber(),
    )


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: `write` is phase one in each task, `commit` phase two on the driver."""

    def __init__(self, options: SinkOptions):
        self.options = options

    def _prefix(self, query_id: str | None) -> str | None:
        if self.options.transactional_id_prefix:
            return self.options.transactional_id_prefix
        return default_prefix(query_id) if query_id else None

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        info = _task_info()
        prefix = self._prefix(info.query_id)
        if prefix is None:  # neither a query id nor transactional.id.prefix
            raise RuntimeError("no streaming query id in the task; set transactional.id.prefix")
        return write_task(self.options, info, prefix, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_batch(self.options, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        query_id = query_id_from_checkpoint(self.options.checkpoint_location)
        abort_batch(self.options, messages, batchId, self._prefix(query_id))


class KafkaBatchWriter(DataSourceArrowWriter):
    """Batch sink: each task's share is one transaction, committed by the driver once every
    task has succeeded; a failed job aborts what is not committed yet.

    Without the `jobId` option every run is a new job (`<prefix>-<random uuid>-<task
    partition>`), so running a job again writes its rows again, and a driver that dies while
    committing leaves the shares committed so far in the output. With `jobId`, the job is a
    one-batch query named by the id (`<prefix>-job-<jobId>-<task partition>`, progress markers
    as for streams): a run of the same id after a failure writes only the shares that were not
    committed, a run after a success writes nothing, and a run whose tasks get other rows than
    the committed ones fails."""

    def __init__(self, options: SinkOptions):
        self.options = options
        base = options.transactional_id_prefix or "onceflow"
        self.job_id = options.job_id
        self.prefix = f"{base}-job-{self.job_id}" if self.job_id else f"{base}-{uuid.uuid4()}"

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        info = _task_info(batch_id=0)
        if self.job_id is None:
            return write_task(self.options, info, self.prefix, iterator)
        with self._named():
            return write_task(self.options, replace(info, query_id=self.job_id), self.prefix,
                              iterator)  # fmt: skip

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.job_id is None:
            commit_batch(self.options, messages, 0, streaming=False)
            return
        with self._named():
            commit_batch(self.options, messages, 0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_batch(self.options, messages, 0, self.prefix)

    @contextmanager
    def _named(self) -> Iterator[None]:
        """A refused re-run names the job, not a streaming batch."""
        try:
            yield
        except MarkerError as exc:
            raise MarkerError(
                f"jobId {self.job_id!r} (transactional ids {self.prefix}-<task partition>) was "
                "run before, and this run is not the same job: its tasks must get the rows "
                "they got then. To write these rows as a new job, use a new jobId. "
                f"(In the words of the streaming sink: {exc})"
            ) from exc
