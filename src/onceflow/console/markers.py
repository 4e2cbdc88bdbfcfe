"""The Spark sink's progress markers per query (docs/spark.md, "Progress markers"): the last
batch whose every share is committed (the query marker, and its keep-alive copy) and each task
partition's last committed batch, so a query that stopped advancing, or a task behind the
others, shows.

Marker groups are `onceflow-markers.<prefix>.query`, `.alive` and `.task-<p>`; their committed
offset is batch id + 1 and their metadata the JSON that `onceflow.spark.markers` parses. The
offsets are read without requireStable: a marker inside an open transaction is not shown
until that transaction commits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onceflow.client.admin import AdminClient
from onceflow.spark.markers import GROUP_PREFIX, MarkerError, QueryMarker, TaskMarker

QUERY_KINDS = ("query", "alive")
TASK_KIND = "task-"


@dataclass(frozen=True)
class TaskProgress:
    task_partition: int
    batch_id: int
    rows: int
    query_id: str
    written_ms: int | None = None  # when the marker was written (None: an older marker)


@dataclass
class QueryProgress:
    """One `transactional.id.prefix`: its query marker (the later copy) and task markers.
    `batch_id` is -1 before the first batch commits; `tasks_behind` are the task partitions
    whose marker is behind it; `errors` lists markers that did not parse."""

    prefix: str
    query_id: str = ""
    batch_id: int = -1
    tasks: int = 0
    written_ms: int | None = None  # when the query marker was written: the batch's commit
    task_markers: list[TaskProgress] = field(default_factory=list)
    tasks_behind: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def split_marker_group(group_id: str) -> tuple[str, str] | None:
    """(prefix, kind) of a marker group, None for another group; the prefix may hold dots."""
    if not group_id.startswith(GROUP_PREFIX):
        return None
    prefix, _, kind = group_id[len(GROUP_PREFIX) :].rpartition(".")
    if not prefix or not (kind in QUERY_KINDS or kind.startswith(TASK_KIND)):
        return None
    return prefix, kind


def list_query_progress(admin: AdminClient) -> list[QueryProgress]:
    """Every query with marker groups on the cluster, sorted by prefix."""
    queries: dict[str, QueryProgress] = {}
    for listing in sorted(admin.list_groups(), key=lambda g: g.group_id):
        split = split_marker_group(listing.group_id)
        if split is None:
            continue
        prefix, kind = split
        progress = queries.setdefault(prefix, QueryProgress(prefix))
        found = admin.list_consumer_group_offsets(listing.group_id, None, require_stable=False)
        for committed in found.values():
            if committed is not None:
                _add_marker(progress, listing.group_id, kind, committed[1])
    for progress in queries.values():
        progress.task_markers.sort(key=lambda t: t.task_partition)
        progress.tasks_behind = [
            t.task_partition for t in progress.task_markers if t.batch_id < progress.batch_id
        ]
    return [queries[p] for p in sorted(queries)]


def _add_marker(progress: QueryProgress, group_id: str, kind: str, metadata: str) -> None:
    try:
        if kind in QUERY_KINDS:
            marker = QueryMarker.parse(group_id, metadata)
            if (marker.batch_id, marker.tasks) >= (progress.batch_id, progress.tasks):
                progress.query_id = marker.query_id
                progress.batch_id, progress.tasks = marker.batch_id, marker.tasks
                progress.written_ms = marker.written_ms
            return
        task = TaskMarker.parse(group_id, metadata)
        task_partition = int(kind[len(TASK_KIND) :])
    except (MarkerError, ValueError) as exc:
        progress.errors.append(f"{group_id}: {exc}")
        return
    progress.task_markers.append(
        TaskProgress(task_partition, task.batch_id, task.rows, task.query_id, task.written_ms)
    )
