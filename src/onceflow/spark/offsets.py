"""Planning a read: which partitions, from which offset to which, in how many tasks.

Offsets in Spark's checkpoint use the JSON of Spark's Kafka source, `{"topic": {"0": 42}}`
(the next offset to read per partition). `PartitionOffsets` is that map keyed by
`(topic, partition)`. `OffsetResolver` asks the broker for partitions and offsets through the
onceflow AdminClient; the rest is pure: `rate_limit` spreads maxOffsetsPerTrigger over the
partitions as Spark does, `plan_ranges` cuts the ranges into tasks (minPartitions,
maxRecordsPerPartition).
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.client.errors import KafkaTimeoutError, error_for_code
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode
from onceflow.spark.options import SourceOptions

__all__ = [
    "DataLossError",
    "OffsetRange",
    "OffsetResolver",
    "PartitionOffsets",
    "from_json",
    "plan_ranges",
    "rate_limit",
    "to_json",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

EARLIEST = -2
LATEST = -1

PartitionOffsets = dict[tuple[str, int], int]


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (retention, DeleteRecords, a deleted topic)."""


class PartitionGoneError(DataLossError):
    """ListOffsets answered UNKNOWN_TOPIC_OR_PARTITION (or no leader) for a partition the
    metadata had just listed: its topic is being deleted or recreated. `latest_offsets`
    lists the partitions again before it gives up."""


# errors of a partition that may pass once the metadata has caught up
_TRANSIENT = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
}


def to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """Spark's Kafka offset JSON (partitions as strings, topics and partitions sorted)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(data: Mapping[str, Mapping[str, Any]]) -> PartitionOffsets:
    return {(t, int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}


@dataclass(frozen=True)
class OffsetRange:
    """One read task: `[from_offset, until_offset)` of a partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def rate_limit(
    start: Mapping[tuple[str, int], int], end: Mapping[tuple[str, int], int], limit: int
) -> PartitionOffsets:
    """Cap `end` so that at most about `limit` offsets are read in all, each partition taking
    its share of the backlog (Spark's `KafkaMicroBatchStream.rateLimit`)."""
    sizes = {tp: max(end[tp] - start.get(tp, 0), 0) for tp in end}
    total = sum(sizes.values())
    if total <= limit:
        return dict(end)
    capped = {}
    for tp, until in end.items():
        begin = start.get(tp, 0)
        share = limit * (sizes[tp] / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        capped[tp] = min(until, begin + step)
    return capped


def plan_ranges(
    start: Mapping[tuple[str, int], int],
    end: Mapping[tuple[str, int], int],
    min_partitions: int | None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """The read tasks of a batch: one per partition with something to read; with
    `max_records_per_partition` a larger range is cut into even parts of at most that many
    offsets (as Spark's `KafkaOffsetRangeCalculator`); then, when there are fewer tasks than
    `min_partitions`, each range is cut into its share of them, rounded down (Spark rounds and
    keeps the ranges whose share is one task whole, which can differ by a task or two).
    Deterministic for the same input, and it must stay so across onceflow versions: a query
    restarted after a crash re-plans its last batch, and the exactly-once sink needs the same
    rows in the same tasks (docs/spark.md, "Limits")."""
    ranges = [
        OffsetRange(t, p, start.get((t, p), 0), until)
        for (t, p), until in sorted(end.items())
        if until > start.get((t, p), 0)
    ]
    if max_records_per_partition:
        ranges = [
            piece
            for r in ranges
            for piece in _split(r, math.ceil(r.size / max_records_per_partition))
        ]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    return [
        piece
        for r in ranges
        for piece in _split(r, max(math.floor(r.size / total * min_partitions), 1))
    ]


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """`r` cut into `parts` ranges of nearly equal size (the last ones take the remainder)."""
    if parts <= 1:
        return [r]
    bounds = [r.from_offset + r.size * i // parts for i in range(parts)] + [r.until_offset]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds) if b > a]


class OffsetResolver:
    """Partitions and offsets of the query's topics, from the broker (driver side)."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.options.client)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def _retrying(self, call: Callable[[AdminClient], T]) -> T:
        """`call(admin)`, retried on a lost connection or a timeout with a new connection
        (Spark's fetchOffset.numRetries and fetchOffset.retryIntervalMs)."""
        for attempt in range(self.options.fetch_offset_retries + 1):
            try:
                return call(self.admin)
            except (OSError, KafkaTimeoutError) as exc:
                self.close()
                if attempt == self.options.fetch_offset_retries:
                    raise
                log.warning("fetching offsets failed (%s); retrying", exc)
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def partitions(self) -> list[tuple[str, int]]:
        """Every partition of the query's topics (assign: exactly the named ones)."""
        opts = self.options
        if opts.assign is not None:
            return sorted((t, p) for t, ps in opts.assign.items() for p in ps)
        names = list(opts.subscribe) if opts.subscribe is not None else None
        described = self._retrying(lambda admin: admin.describe_topics(names))
        out: list[tuple[str, int]] = []
        for name, topic in described.items():
            if topic.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                # as Kafka's consumer: a subscribed topic it may not read is an error, not an
                # empty topic (a pattern never sees such topics: Metadata hides them)
                raise error_for_code(
                    topic.error_code,
                    f"Not authorized to access topics: [{name}]; the source needs READ on it",
                )
            if topic.error_code != ErrorCode.NONE or topic.is_internal or not opts.matches(name):
                continue
            out.extend((name, p.partition) for p in topic.partitions)
        return sorted(out)

    def list_offsets(
        self, partitions: Iterable[tuple[str, int]], spec: OffsetSpec
    ) -> dict[tuple[str, int], int]:
        """One offset per partition (latest: the last stable offset under read_committed);
        a timestamp with no later record gives -1."""
        specs = {TopicPartition(t, p): spec for t, p in partitions}
        if not specs:
            return {}
        isolation = 1 if self.options.read_committed else 0
        results = self._retrying(lambda admin: admin.list_offsets(specs, isolation_level=isolation))
        out = {}
        for tp, result in results.items():
            if result.error_code != ErrorCode.NONE:
                error = PartitionGoneError if result.error_code in _TRANSIENT else DataLossError
                raise error(
                    f"cannot list offsets of {tp.topic}-{tp.partition}: {result.error_code.name}"
                )
            out[(tp.topic, tp.partition)] = result.offset
        return out

    def latest_offsets(self) -> PartitionOffsets:
        """`latest()` of every current partition. When a partition disappears between the
        metadata and ListOffsets (a topic deleted or recreated at that moment), both are asked
        again, up to fetchOffset.numRetries times, fetchOffset.retryIntervalMs apart."""
        for attempt in range(self.options.fetch_offset_retries + 1):
            try:
                return self.latest(self.partitions())
            except PartitionGoneError as exc:
                if attempt == self.options.fetch_offset_retries:
                    raise
                log.warning("%s; listing the partitions again", exc)
                time.sleep(self.options.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    def earliest(self, partitions: Iterable[tuple[str, int]]) -> PartitionOffsets:
        return self.list_offsets(partitions, OffsetSpec.earliest())

    def latest(self, partitions: Iterable[tuple[str, int]]) -> PartitionOffsets:
        return self.list_offsets(partitions, OffsetSpec.latest())

    def resolve(
        self,
        spec: Any,
        timestamps: Any,
        partitions: list[tuple[str, int]],
        default: int = EARLIEST,
    ) -> PartitionOffsets:
        """startingOffsets / endingOffsets (or their timestamp forms) as concrete offsets for
        `partitions`; JSON offsets -2/-1 mean earliest/latest, partitions the JSON does not
        name take `default` (earliest for starting offsets, latest for ending offsets)."""
        if timestamps is not None:
            return self._by_timestamp(timestamps, partitions)
        if spec == "earliest":
            return self.earliest(partitions)
        if spec == "latest":
            return self.latest(partitions)
        wanted = {(t, p): o for t, ps in spec.items() for p, o in ps.items()}
        missing = sorted(set(wanted) - set(partitions))
        if missing:
            raise ValueError(f"offsets given for partitions the query does not read: {missing[:5]}")
        earliest = self.earliest(p for p in partitions if wanted.get(p, default) == EARLIEST)
        latest = self.latest(p for p in partitions if wanted.get(p, default) == LATEST)
        out = {}
        for tp in partitions:
            offset = wanted.get(tp, default)
            out[tp] = (
                earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
            )
        return out

    def _by_timestamp(self, timestamps: Any, partitions: list[tuple[str, int]]) -> PartitionOffsets:
        if isinstance(timestamps, int):
            wanted = dict.fromkeys(partitions, timestamps)
        else:
            wanted = {(t, p): ts for t, ps in timestamps.items() for p, ts in ps.items()}
            partitions = sorted(wanted)
        out = {}
        for tp in partitions:
            offset = self.list_offsets([tp], OffsetSpec.for_timestamp(wanted[tp]))[tp]
            if offset < 0:
                if self.options.timestamp_strategy != "latest":
                    raise ValueError(
                        f"No offset of {tp[0]}-{tp[1]} has a timestamp >= {wanted[tp]} "
                        "(set startingOffsetsByTimestampStrategy=latest to start at the end)"
                    )
                offset = self.latest([tp])[tp]
            out[tp] = offset
        return out
