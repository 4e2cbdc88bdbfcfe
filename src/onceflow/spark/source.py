"""The source: Spark's Kafka source schema and options over the onceflow client.

Driver side, `KafkaStreamReader` plans micro-batches: the latest offsets are the last stable
offsets (read_committed, the default) so a batch never ends inside an open transaction, and a
re-planned batch (Spark reuses the offsets in its log) reads exactly the same records.
`KafkaBatchReader` plans a batch query from startingOffsets to endingOffsets.

Executor side, `read_range` reads `[from, until)` of one partition with a onceflow `Consumer`
(assign, no group) and yields `pyarrow.RecordBatch`es in offset order; aborted records and
control markers take offsets but give no rows, and the read stops at `until`, not at a row
count. Offsets below the log start offset are data loss: an error naming the partition and
offsets with failOnDataLoss=true (the default), else the gap is skipped.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from onceflow.client.consumer import Consumer, FetchedColumns
from onceflow.client.errors import KafkaError, OffsetOutOfRangeError
from onceflow.common import TopicPartition
from onceflow.spark.metrics import recorder
from onceflow.spark.offsets import (
    LATEST,
    DataLossError,
    OffsetRange,
    OffsetResolver,
    PartitionOffsets,
    plan_ranges,
    rate_limit,
    to_json,
)
from onceflow.spark.options import SourceOptions
from onceflow.spark.pools import consumer_for
from onceflow.spark.topic_ids import (
    TopicIds,
    current_topic_ids,
    join_offsets,
    recreated_topics,
    restart_recreated,
    split_offsets,
)

__all__ = ["KafkaBatchReader", "KafkaStreamReader", "read_range", "source_schema"]

log = logging.getLogger(__name__)

BASE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"
ROWS_PER_ARROW_BATCH = 4096
METRICS_KEY = "@metrics"  # in the reported latest offset: the offsets-behind summary


def source_schema(include_headers: bool) -> str:
    """Spark's Kafka source schema (with `headers` when includeHeaders=true)."""
    return f"{BASE_SCHEMA}, {HEADERS_FIELD}" if include_headers else BASE_SCHEMA


class KafkaInputPartition(InputPartition):
    """A read task: one `OffsetRange` (picklable)."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range


def _range_of(partition: InputPartition) -> OffsetRange:
    """The range of one of our read tasks (Spark hands back what `partitions` planned)."""
    if not isinstance(partition, KafkaInputPartition):
        raise TypeError(f"not an onceflow read task: {partition!r}")
    return partition.range


def _arrow_schema(include_headers: bool) -> Any:
    import pyarrow as pa

    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),  # Spark's TimestampType in Arrow
        ("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([("key", pa.string()), ("value", pa.binary())])
        fields.append(("headers", pa.list_(header)))
    return pa.schema(fields)


def _to_arrow(chunks: list[FetchedColumns], schema: Any, include_headers: bool) -> Any:
    """Runs of one partition's records -> one RecordBatch with Spark's Kafka columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def column(name: str) -> list[Any]:
        if len(chunks) == 1:
            found: list[Any] = getattr(chunks[0], name)
            return found
        return [x for chunk in chunks for x in getattr(chunk, name)]

    offsets = column("offsets")
    n = len(offsets)
    first = chunks[0]
    arrays = [
        pa.array(column("keys"), pa.binary()),
        pa.array(column("values"), pa.binary()),
        pa.array([first.topic] * n, pa.string()),
        pa.array([first.partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pc.multiply(pa.array(column("timestamps"), pa.int64()), 1000).cast(
            schema.field("timestamp").type
        ),
        pa.array(column("timestamp_types"), pa.int32()),
    ]
    if include_headers:
        arrays.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in headers] for headers in column("headers")],
                schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _before(chunk: FetchedColumns, until: int) -> FetchedColumns:
    """The part of `chunk` below offset `until` (offsets are ascending)."""
    cut = bisect.bisect_left(chunk.offsets, until)
    return FetchedColumns(
        chunk.topic,
        chunk.partition,
        chunk.offsets[:cut],
        chunk.timestamps[:cut],
        chunk.timestamp_types[:cut],
        chunk.keys[:cut],
        chunk.values[:cut],
        chunk.headers[:cut],
    )


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[Any]:
    """Yield the records of `[from, until)` of one partition as Arrow record batches."""
    r = offset_range
    schema = _arrow_schema(options.include_headers)
    config = {
        **options.client,
        "isolation.level": "read_committed" if options.read_committed else "read_uncommitted",
        "auto.offset.reset": "none",
        "enable.auto.commit": False,
        # a read task (or a consumer kept idle in a worker) must never recreate a deleted topic
        "allow.auto.create.topics": False,
    }
    timeout_s = options.poll_timeout_ms / 1000
    tp = TopicPartition(r.topic, r.partition)
    with consumer_for(config, tp, r.from_offset, options.reuse_clients) as consumer:
        position = r.from_offset
        pending: list[FetchedColumns] = []
        pending_rows = 0
        last_progress = time.monotonic()
        while position < r.until_offset:
            try:
                chunks = consumer.poll_columns(
                    timeout=min(timeout_s, 1.0), max_records=ROWS_PER_ARROW_BATCH
                )
            except OffsetOutOfRangeError:
                position = _skip_lost(consumer, options, r, position)
                continue
            for chunk in chunks:
                if chunk.offsets[-1] >= r.until_offset:
                    chunk = _before(chunk, r.until_offset)
                pending.append(chunk)
                pending_rows += len(chunk.offsets)
            if pending_rows >= ROWS_PER_ARROW_BATCH:
                yield _to_arrow(pending, schema, options.include_headers)
                pending, pending_rows = [], 0
            new_position = consumer.position(tp)
            if new_position != position:
                last_progress = time.monotonic()
                position = new_position
            elif time.monotonic() - last_progress > timeout_s:
                raise TimeoutError(
                    f"Timed out reading {r.topic}-{r.partition} at offset {position} "
                    f"(reading up to {r.until_offset}) after {timeout_s:.0f}s "
                    "(kafkaConsumer.pollTimeoutMs)"
                )
        if pending_rows:
            yield _to_arrow(pending, schema, options.include_headers)


def _skip_lost(consumer: Consumer, options: SourceOptions, r: OffsetRange, position: int) -> int:
    """The fetch position fell below the log start offset: fail, or skip to the start."""
    resolver = OffsetResolver(options)
    try:
        earliest = resolver.earliest([(r.topic, r.partition)])[(r.topic, r.partition)]
    finally:
        resolver.close()
    message = (
        f"Cannot fetch offsets {position}..{r.until_offset} of {r.topic}-{r.partition}: the "
        f"log now starts at {earliest}; records were removed (retention or DeleteRecords) "
        "before the query read them."
    )
    if options.fail_on_data_loss:
        raise DataLossError(
            message + " Set failOnDataLoss=false to skip lost records instead of failing."
        )
    log.warning("%s Skipping them (failOnDataLoss=false).", message)
    target = min(max(earliest, position), r.until_offset)
    consumer.seek((r.topic, r.partition), target)
    return target


# ---------------------------------------------------------------------------------- streaming


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch planning on the driver (one long-lived instance per query run)."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.resolver = OffsetResolver(options)
        self._available_now: PartitionOffsets | None = None
        self._last_trigger = time.monotonic()
        self._latest: PartitionOffsets | None = None
        self._seen_ids: TopicIds | None = None  # by the last latestOffset
        self._behind: PartitionOffsets = {}  # offsets behind latest after the last plan

    def initialOffset(self) -> dict[str, Any]:
        """startingOffsets (or startingTimestamp/startingOffsetsByTimestamp) resolved, with
        the ids of their topics."""
        opts = self.options
        partitions = self.resolver.partitions()
        offsets = self.resolver.resolve(opts.starting, opts.starting_timestamps, partitions)
        ids = current_topic_ids(self.resolver, (t for t, _ in offsets))
        return join_offsets(offsets, ids)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the offsets available now, then stop."""
        self._available_now = self._latest_available()

    def _latest_available(self) -> PartitionOffsets:
        return self.resolver.latest_offsets()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The end of the next batch: the last stable offset of every partition (capped by
        maxOffsetsPerTrigger / the AvailableNow target); partitions new since `start`, and
        those of a topic recreated since (a new topic id), begin at offset 0. With
        minOffsetsPerTrigger, returns `start` (no batch) until enough offsets are there or
        maxTriggerDelay has passed."""
        begin, known_ids = split_offsets(start)
        if self._available_now is not None:
            latest = dict(self._available_now)
        else:
            latest = self._latest_available()
        ids = current_topic_ids(self.resolver, {t for t, _ in [*begin, *latest]})
        self._seen_ids = ids
        opts = self.options
        begin = restart_recreated(begin, known_ids, ids, latest, opts.fail_on_data_loss)
        self._check_lost_partitions(begin, latest)
        for tp, offset in begin.items():  # a partition that disappeared keeps its offset
            latest.setdefault(tp, offset)
        latest = self._check_went_back(begin, latest)
        self._latest = latest
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        minimum = opts.min_offsets_per_trigger
        if minimum is not None and self._available_now is None:
            available = sum(max(o - begin.get(tp, 0), 0) for tp, o in latest.items())
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            if available < minimum and waited_ms < opts.max_trigger_delay_ms:
                self._note_behind(begin)
                return start
        self._note_behind(latest)
        end = join_offsets(latest, {**known_ids, **ids})
        if end != start:
            self._last_trigger = time.monotonic()
        return end

    def _check_lost_partitions(self, begin: PartitionOffsets, latest: PartitionOffsets) -> None:
        gone = sorted(set(begin) - set(latest))
        if not gone:
            return
        message = f"Partitions {gone[:10]} are gone (topic deleted?); offsets were {begin}"
        if self.options.fail_on_data_loss:
            raise DataLossError(message + ". Set failOnDataLoss=false to go on without them.")
        log.warning("%s; going on without them (failOnDataLoss=false)", message)

    def _check_went_back(
        self, begin: PartitionOffsets, latest: PartitionOffsets
    ) -> PartitionOffsets:
        """A partition whose latest offset is below the query's position, with the same topic
        id (or none known): asked again (fetchOffset.numRetries, as Spark does for a broker
        that lags behind), then data loss. With failOnDataLoss=false the query goes on from
        the lower offset, as Spark's Kafka source does."""
        opts = self.options
        for _attempt in range(opts.fetch_offset_retries):
            back = [tp for tp, o in begin.items() if latest[tp] < o]
            if not back or self._available_now is not None:
                break
            time.sleep(opts.fetch_offset_retry_interval_ms / 1000)
            latest = {**latest, **self.resolver.latest(back)}
        back = [tp for tp, o in sorted(begin.items()) if latest[tp] < o]
        if not back:
            return latest
        went = ", ".join(f"{t}-{p} from {begin[(t, p)]} to {latest[(t, p)]}" for t, p in back)
        message = (
            f"The latest offsets went back ({went}): records were truncated, or the topic was "
            "recreated on a broker that reports no topic ids."
        )
        if opts.fail_on_data_loss:
            raise DataLossError(
                message + " Set failOnDataLoss=false to go on from the lower offsets."
            )
        log.warning("%s Going on from the lower offsets (failOnDataLoss=false).", message)
        return latest

    def _note_behind(self, planned: PartitionOffsets) -> None:
        """Per partition, the offsets between the batch just planned (`planned`: its end)
        and the latest offset: for the progress report and the Prometheus endpoint."""
        latest = self._latest or {}
        self._behind = {tp: max(o - planned.get(tp, o), 0) for tp, o in latest.items()}
        metrics = recorder(self.options.metrics_port)
        if metrics is not None:
            for (topic, partition), behind in self._behind.items():
                labels = {"topic": topic, "partition": partition}
                metrics.set("onceflow_spark_source_offsets_behind_latest", labels, behind)
            metrics.flush()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        """The latest offsets, as Spark's Kafka source reports them (the progress report's
        `latestOffset`), plus under `@metrics` the summary its `metrics` map has:
        avg/max/minOffsetsBehindLatest over the partitions, as strings."""
        if self._latest is None:
            return None
        report: dict[str, Any] = dict(to_json(self._latest))
        behind = list(self._behind.values())
        if behind:
            report[METRICS_KEY] = {
                "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
                "maxOffsetsBehindLatest": str(max(behind)),
                "minOffsetsBehindLatest": str(min(behind)),
            }
        return report

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Deterministic for the same offsets: a re-planned batch reads the same ranges. The
        partitions of a topic recreated between `start` and `end` are read from offset 0;
        a batch whose topic was recreated after it was planned (a restart re-plans it) is
        data loss."""
        begin, begin_ids = split_offsets(start)
        until, until_ids = split_offsets(end)
        gone = self._recreated_since_planned(until_ids, until)
        until = {tp: o for tp, o in until.items() if tp[0] not in gone}
        begin = {
            tp: o for tp, o in begin.items() if tp[0] not in recreated_topics(begin_ids, until_ids)
        }
        for tp, offset in until.items():
            if offset < begin.get(tp, 0):
                message = (
                    f"{tp[0]}-{tp[1]}: end offset {offset} is below start offset "
                    f"{begin[tp]} (was the topic deleted and recreated?)"
                )
                if self.options.fail_on_data_loss:
                    raise DataLossError(message)
                log.warning("%s; skipping it (failOnDataLoss=false)", message)
        ranges = plan_ranges(
            begin, until, self.options.min_partitions, self.options.max_records_per_partition
        )
        return [KafkaInputPartition(r) for r in ranges]

    def _recreated_since_planned(self, planned: TopicIds, until: PartitionOffsets) -> list[str]:
        """The topics of a planned batch must still be the ones it was planned on: those that
        are not are an error, or with failOnDataLoss=false returned (not read)."""
        current = self._seen_ids
        if current is None or any(current.get(t) != i for t, i in planned.items()):
            current = current_topic_ids(self.resolver, planned)
        self._seen_ids = None  # only the batch just planned by latestOffset may reuse them
        recreated = recreated_topics(planned, current)
        for topic in recreated:
            message = (
                f"Topic {topic} was recreated (topic id {planned[topic]} is now "
                f"{current[topic]}) after this batch was planned; the batch's records of it "
                f"(up to offsets {to_json({tp: o for tp, o in until.items() if tp[0] == topic})}) "
                "are gone."
            )
            if self.options.fail_on_data_loss:
                raise DataLossError(
                    message + " Restart the query with failOnDataLoss=false to go on with the "
                    "new topic from its first offset."
                )
            log.warning("%s Not reading them (failOnDataLoss=false).", message)
        return recreated

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, _range_of(partition))

    def commit(self, end: dict[str, Any]) -> None:
        """Spark finished the batches up to `end`. The offsets that matter live in Spark's
        checkpoint; with kafka.group.id they are also committed to that consumer group, so
        Kafka's lag tools show the query's position (best effort: Spark calls this when the
        next batch starts, and a failure is only logged)."""
        group = self.options.group_id
        if not group:
            return
        offsets = {TopicPartition(t, p): (o, "") for (t, p), o in split_offsets(end)[0].items()}
        try:
            errors = self.resolver.admin.alter_consumer_group_offsets(group, offsets)
        except (OSError, KafkaError, TimeoutError) as exc:
            log.warning("could not commit offsets to group %s: %s", group, exc)
            return
        failed = {f"{tp.topic}-{tp.partition}": e.name for tp, e in errors.items() if e != 0}
        if failed:
            log.warning("could not commit offsets to group %s: %s", group, failed)

    def stop(self) -> None:
        self.resolver.close()


# ---------------------------------------------------------------------------------- batch


class KafkaBatchReader(DataSourceReader):
    """A batch query: every record from startingOffsets to endingOffsets, planned once."""

    def __init__(self, options: SourceOptions):
        self.options = options

    def partitions(self) -> list[InputPartition]:
        opts = self.options
        resolver = OffsetResolver(opts)
        try:
            partitions = resolver.partitions()
            start = resolver.resolve(opts.starting, opts.starting_timestamps, partitions)
            end = resolver.resolve(opts.ending, opts.ending_timestamps, partitions, LATEST)
        finally:
            resolver.close()
        ranges = plan_ranges(start, end, opts.min_partitions, opts.max_records_per_partition)
        return [KafkaInputPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, _range_of(partition))
