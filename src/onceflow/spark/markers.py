"""Progress markers of the exactly-once sink: what they record, where they live, and the checks
that turn a replay the markers cannot vouch for into an error instead of duplicates or loss.

Markers are committed consumer-group offsets on partition 0 of the marker topic
(`progressTopic`, else `topic`); their metadata is a short JSON document (Kafka keeps up to
`offset.metadata.max.bytes`, 4096 by default, per offset). Every marker group is named
`onceflow-markers.<transactional.id.prefix>.<kind>`, so tools can filter them by that prefix:

- a task marker, group `...task-<p>`: offset `N + 1` once task partition p's share of batch N
  is committed. It is committed in the share's own transaction, and records the query id,
  the batch id, the share's row count and digest, and the output topic (the fingerprint).
- the query marker, group `...query`: offset `N + 1` once every share of batch N is committed,
  with the query id and `tasks`, the number of task partitions that may hold a committed share
  of batch N + 1 (no task id at or above it does). The driver commits it after the shares of
  a batch, and before them when the batch has more task partitions than `tasks`. For a fixed
  batch `tasks` only grows, so of two copies the later is the one with the larger (batch,
  tasks). `MarkerKeepAlive` (`onceflow.spark.keepalive`) keeps a copy alive in group `...alive`
  while the query is idle.

Every marker also records `time`, when it was written (ms since the epoch), for people and
tools (`onceflow console`'s Spark page); no check reads it, and markers written before it
existed parse with `written_ms` None.

A re-run task whose marker covers its batch compares fingerprints (`check_same_share`); the
driver compares the query marker with the batch it commits (`check_query_marker`). Every
`MarkerError` names what changed and how to recover (docs/spark.md, "When the sink refuses
a replay").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from onceflow.client.admin import AdminClient
from onceflow.client.offsets import OffsetAndMetadata
from onceflow.common import TopicPartition, wall_clock_ms
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "GROUP_PREFIX",
    "MarkerError",
    "QueryMarker",
    "RowDigest",
    "TaskMarker",
    "check_query_marker",
    "check_same_share",
    "alive_group",
    "check_task_marker",
    "query_group",
    "read_query_marker",
    "refresh_query_marker",
    "read_task_marker",
    "task_group",
    "write_query_marker",
]

GROUP_PREFIX = "onceflow-markers."
FORMAT = 1
_MASK = (1 << 64) - 1
RECOVERY_DOC = "docs/spark.md, 'When the sink refuses a replay'"


class MarkerError(RuntimeError):
    """The progress markers do not vouch for this replay; the message names what changed and
    how to recover. The sink has written nothing of the batch."""


def task_group(prefix: str, partition_id: int) -> str:
    return f"{GROUP_PREFIX}{prefix}.task-{partition_id}"


def query_group(prefix: str) -> str:
    return f"{GROUP_PREFIX}{prefix}.query"


def alive_group(prefix: str) -> str:
    """The keep-alive's copy of the query marker."""
    return f"{GROUP_PREFIX}{prefix}.alive"


class RowDigest:
    """Row count and an order-independent digest of a task's rows (the sum of per-row BLAKE2b
    hashes): after a shuffle a re-run task may get the same rows in another order."""

    def __init__(self) -> None:
        self.rows = 0
        self._sum = 0

    def add(self, topic: Any, value: Any, key: Any, partition: Any, headers: Any) -> None:
        row = repr((topic, key, value, partition, headers)).encode()
        digest = hashlib.blake2b(row, digest_size=8).digest()
        self._sum = (self._sum + int.from_bytes(digest, "big")) & _MASK
        self.rows += 1

    @property
    def hexdigest(self) -> str:
        return f"{self._sum:016x}"


def _metadata(kind: str, fields: dict[str, Any], written_ms: int | None) -> str:
    time = wall_clock_ms() if written_ms is None else written_ms
    doc = {"onceflow": FORMAT, "kind": kind, **fields, "time": time}
    return json.dumps(doc, separators=(",", ":"))


def _parse(group: str, kind: str, metadata: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The fields `names` of a marker, and `time` (None when absent or not an integer)."""
    try:
        doc = json.loads(metadata)
        if doc.get("onceflow") != FORMAT or doc.get("kind") != kind:
            raise ValueError(metadata)
        time = doc.get("time")
        written = time if isinstance(time, int) and not isinstance(time, bool) else None
        return {**{name: doc[name] for name in names}, "time": written}
    except (ValueError, TypeError, KeyError, AttributeError):  # not JSON, or other fields
        raise MarkerError(
            f"The progress marker of consumer group {group} is not one this onceflow version "
            f"writes (metadata {metadata[:80]!r}): it was written by an older onceflow or by "
            "another tool. Use a new transactional.id.prefix (the query then starts its "
            f"markers afresh) after checking the output of the last batch ({RECOVERY_DOC})."
        ) from None


@dataclass(frozen=True)
class TaskMarker:
    """Task partition's committed share of `batch_id`: its fingerprint."""

    query_id: str
    batch_id: int
    rows: int
    digest: str
    topic: str  # the `topic` option; "" when each row names its topic
    producer: tuple[int, int]  # producer id and epoch of the transaction that committed it
    # when the marker was written, ms since the epoch (None: now, when it is written; or
    # read from a marker written before this field); not part of the marker's identity
    written_ms: int | None = field(default=None, compare=False)

    def committed(self) -> OffsetAndMetadata:
        fields = {"query": self.query_id, "batch": self.batch_id, "rows": self.rows}
        fields.update(digest=self.digest, topic=self.topic, producer=list(self.producer))
        return OffsetAndMetadata(self.batch_id + 1, _metadata("task", fields, self.written_ms))

    @classmethod
    def parse(cls, group: str, metadata: str) -> TaskMarker:
        names = ("query", "batch", "rows", "digest", "topic", "producer")
        doc = _parse(group, "task", metadata, names)
        producer_id, epoch = doc["producer"]
        return cls(
            doc["query"], doc["batch"], doc["rows"], doc["digest"], doc["topic"],
            (producer_id, epoch), doc["time"],
        )  # fmt: skip


@dataclass(frozen=True)
class QueryMarker:
    """`batch_id`: the last batch whose every share is committed (-1: none yet); `tasks`: how
    many task partitions may hold a committed share of batch `batch_id + 1`."""

    query_id: str
    batch_id: int
    tasks: int
    # as TaskMarker.written_ms; the keep-alive copy keeps the time of the marker it copies
    written_ms: int | None = field(default=None, compare=False)

    def committed(self) -> tuple[int, str]:
        fields = {"query": self.query_id, "batch": self.batch_id, "tasks": self.tasks}
        return (self.batch_id + 1, _metadata("query", fields, self.written_ms))

    @classmethod
    def parse(cls, group: str, metadata: str) -> QueryMarker:
        doc = _parse(group, "query", metadata, ("query", "batch", "tasks"))
        return cls(doc["query"], doc["batch"], doc["tasks"], doc["time"])


# ---------------------------------------------------------------------------------- I/O


def read_task_marker(
    admin: AdminClient,
    prefix: str,
    partition_id: int,
    where: TopicPartition,
    timeout: float,
    stable: bool = True,
) -> TaskMarker | None:
    """The task partition's committed marker. `stable` (OffsetFetch's requireStable) waits
    while a transaction with a marker for the group is open or being completed, and raises
    UNSTABLE_OFFSET_COMMIT when one stays open past `timeout`; without it, the last marker
    committed is returned at once."""
    group = task_group(prefix, partition_id)
    found = admin.list_consumer_group_offsets(
        group, [where], require_stable=stable, timeout=timeout
    )
    committed = found.get(where)
    return None if committed is None else TaskMarker.parse(group, committed[1])


def _read_one(
    admin: AdminClient, group: str, timeout: float
) -> tuple[TopicPartition, QueryMarker] | None:
    found = admin.list_consumer_group_offsets(group, None, require_stable=True, timeout=timeout)
    for tp, committed in sorted(found.items()):
        if committed is not None:
            return tp, QueryMarker.parse(group, committed[1])
    return None


def read_query_marker(
    admin: AdminClient, prefix: str, timeout: float
) -> tuple[TopicPartition, QueryMarker] | None:
    """The query marker and the partition it is on (looked up on every partition, so that a
    changed `topic` or `progressTopic` shows as markers elsewhere, not as no markers): the
    later of the driver's copy and the keep-alive's (`refresh_query_marker`)."""
    copies = [_read_one(admin, g, timeout) for g in (query_group(prefix), alive_group(prefix))]
    found = [c for c in copies if c is not None]
    return max(found, key=lambda c: (c[1].batch_id, c[1].tasks)) if found else None


def write_query_marker(
    admin: AdminClient,
    prefix: str,
    where: TopicPartition,
    marker: QueryMarker,
    timeout: float,
    group: str | None = None,
) -> None:
    """Commit the query marker (OffsetCommit for a group without members) to the driver's
    group, or to `group`."""
    group = group or query_group(prefix)
    result = admin.alter_consumer_group_offsets(group, {where: marker.committed()}, timeout)
    code = result.get(where)
    if code != ErrorCode.NONE:
        raise RuntimeError(f"could not commit the query marker to {group}: {code}")


def refresh_query_marker(admin: AdminClient, prefix: str, timeout: float) -> QueryMarker | None:
    """Keep the query marker alive: commit the current one (the later of the two copies) to
    the keep-alive's own group. Never to the driver's group, which the driver's commits may be
    moving on meanwhile; the keep-alive's copy may lag, and readers take the later copy, so
    the race costs nothing. Returns the marker committed (None before the query's first
    commit)."""
    found = read_query_marker(admin, prefix, timeout)
    if found is None:
        return None
    where, marker = found
    write_query_marker(admin, prefix, where, marker, timeout, alive_group(prefix))
    return marker


# ---------------------------------------------------------------------------------- checks


def check_task_marker(
    marker: TaskMarker | None, query_id: str, batch_id: int, partition_id: int, prefix: str
) -> None:
    """A task's marker must be its own query's, and not from a batch after this one."""
    if marker is None:
        return
    if marker.query_id != query_id:
        raise _another_query(prefix, marker.query_id, marker.batch_id, query_id)
    if marker.batch_id > batch_id:
        raise MarkerError(
            f"task partition {partition_id} of query {query_id} has a marker for batch "
            f"{marker.batch_id}, after batch {batch_id} that Spark is running: the checkpoint "
            "is older than the markers (restored from a backup, or copied). Restart from the "
            f"checkpoint that wrote batch {marker.batch_id}, or use a new "
            f"transactional.id.prefix and accept that batches {batch_id}.."
            f"{marker.batch_id} are written again ({RECOVERY_DOC})."
        )


def _another_query(prefix: str, other: str, other_batch: int, query_id: str) -> MarkerError:
    return MarkerError(
        f"transactional.id.prefix {prefix!r} is in use by another query: its progress markers "
        f"belong to query {other} (batch {other_batch}), but this is query {query_id}. Two "
        "queries (or a query restarted with a new checkpoint) must not share a prefix: give "
        "this query its own transactional.id.prefix, or, if the other query is retired for "
        f"good, delete its marker groups ({GROUP_PREFIX}{prefix}.*) first ({RECOVERY_DOC})."
    )


def check_same_share(marker: TaskMarker, digest: RowDigest, topic: str, partition_id: int) -> None:
    """A re-run task whose marker covers its batch must hold the share that was committed."""
    changes = []
    if marker.rows != digest.rows:
        changes.append(f"it committed {marker.rows} rows, the re-run has {digest.rows} rows")
    elif marker.digest != digest.hexdigest:
        changes.append(f"it committed {marker.rows} rows, the re-run has other rows")
    if marker.topic != topic:
        changes.append(f"the topic option was {marker.topic!r}, now {topic!r}")
    if changes:
        raise MarkerError(
            f"task partition {partition_id} of batch {marker.batch_id} committed its share "
            f"before the restart, but the re-run is not the same: {'; '.join(changes)}. "
            "Something that decides which rows a task gets changed between the crash and the "
            "restart (minPartitions, maxRecordsPerPartition, the input partitions, "
            "spark.sql.shuffle.partitions, the code, or the output topic). Restart with the "
            f"settings and code batch {marker.batch_id} was first run with; change them once "
            f"the query has passed that batch ({RECOVERY_DOC})."
        )


def check_query_marker(
    found: tuple[TopicPartition, QueryMarker] | None,
    where: TopicPartition,
    query_id: str,
    batch_id: int,
    prefix: str,
    recreate_at: int | None,
) -> None:
    """The query marker must be this query's, on the marker partition in use, and say that
    batch `batch_id - 1` (or `batch_id`) is the last one committed."""
    if found is None:
        if batch_id == 0 or recreate_at == batch_id:
            return
        raise MarkerError(
            f"query {query_id} is at batch {batch_id}, but its progress markers "
            f"({GROUP_PREFIX}{prefix}.*, on {where.topic} partition {where.partition}) are "
            "gone: they expired (offsets.retention.minutes after their last commit: the "
            "query was stopped or idle longer than that) or were deleted, or "
            "transactional.id.prefix changed. Writing the batch again could duplicate the "
            f"shares of batch {batch_id} committed before. If the query stopped cleanly "
            f"after batch {batch_id - 1}, or after checking that nothing of batch {batch_id} "
            f"is in the output, restart once with the sink option recreateMarkersAtBatch="
            f"{batch_id} ({RECOVERY_DOC})."
        )
    tp, marker = found
    if tp != where:
        raise MarkerError(
            f"the progress markers of {prefix!r} are on {tp.topic} partition {tp.partition}, "
            f"but the sink now uses {where.topic} partition {where.partition}: the topic or "
            "progressTopic option changed between a crash and the restart. Restart with "
            f"progressTopic={tp.topic} (or the topic option as before) ({RECOVERY_DOC})."
        )
    if marker.query_id != query_id:
        raise _another_query(prefix, marker.query_id, marker.batch_id, query_id)
    if marker.batch_id > batch_id or marker.batch_id < batch_id - 1:
        raise MarkerError(
            f"the progress markers of query {query_id} say batch {marker.batch_id} is the "
            f"last one committed, but Spark's checkpoint is at batch {batch_id}: the "
            "checkpoint and the markers are not from the same run (a checkpoint restored "
            "from a backup or copied). Restart from the matching checkpoint, or use a new "
            f"transactional.id.prefix after checking the output ({RECOVERY_DOC})."
        )
