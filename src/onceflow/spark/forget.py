"""Forgetting a retired streaming query's sink state: its marker groups and transactional ids.

The exactly-once sink gives each write task partition `p` a transactional id `<prefix>-<p>`
(`onceflow.spark.twophase`; the prefix is the sink's `transactional.id.prefix`, else
`onceflow-<query id>`) and progress-marker groups named after the prefix (see
`GROUP_PREFIX`). Nothing removes them when a query is retired: the groups stay in group
listings until `offsets.retention.minutes` passes, and a transaction the query left open holds
back read_committed readers of its output until `transaction.timeout.ms` passes.

`find_query_state` lists them: groups from ListGroups, transactional ids from ListTransactions
(KIP-664; a broker without it gives only the ids the task marker groups name).
`forget_query_state` runs InitProducerId on every id, which aborts what the id left open and
fences a task still running, then deletes the groups (DeleteGroups). Kafka keeps a
transactional id itself until `transactional.id.expiration.ms`; it has no request to delete
one.

Only for a query that will never run again from its checkpoint: restarted, it would find no
markers and write its committed batches again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from onceflow.client.admin import AdminClient
from onceflow.client.errors import KafkaError, UnsupportedVersionError
from onceflow.client.producer import Producer
from onceflow.protocol.errors import ErrorCode
from onceflow.spark.markers import GROUP_PREFIX
from onceflow.spark.twophase import default_prefix, query_id_from_checkpoint, transactional_id

__all__ = ["QueryState", "find_query_state", "forget_query_state", "prefix_of_checkpoint"]

log = logging.getLogger(__name__)


@dataclass
class QueryState:
    """What a query's sink left on the cluster; `errors` is filled by `forget_query_state`."""

    prefix: str
    groups: list[str] = field(default_factory=list)
    transactional_ids: dict[str, str] = field(default_factory=dict)  # id -> state
    errors: dict[str, str] = field(default_factory=dict)  # group or id -> what failed

    @property
    def empty(self) -> bool:
        return not self.groups and not self.transactional_ids


def prefix_of_checkpoint(checkpoint: str | None) -> str:
    """The default prefix of the query whose checkpoint is at `checkpoint` (a local path)."""
    query_id = query_id_from_checkpoint(checkpoint)
    if query_id is None:
        raise ValueError(
            f"no Spark query id in {checkpoint}/metadata; give the sink's "
            "transactional.id.prefix instead"
        )
    return default_prefix(query_id)


# Marker groups are named `onceflow-markers.<prefix>.<kind>` (task-<p>, query, alive:
# onceflow.spark.markers). Older sinks named each task's marker group like its transactional
# id, `<prefix>-<p>`; both are recognised.


def _task_partition(name: str, prefix: str) -> int | None:
    """`p` when `name` is the id of task partition `p` under `prefix`, else None."""
    head, _, tail = name.rpartition("-")
    if not tail.isdigit() or transactional_id(prefix, int(tail)) != name or not head:
        return None
    return int(tail)


def _is_marker_group(name: str, prefix: str) -> bool:
    return name.startswith(f"{GROUP_PREFIX}{prefix}.") or (
        _task_partition(name, prefix) is not None
    )


def _ids_of_groups(groups: list[str], prefix: str) -> list[str]:
    """The transactional ids the task marker groups name (when the broker cannot list ids)."""
    out = set()
    for group in groups:
        _, _, kind = group.rpartition(".task-")
        p = int(kind) if kind.isdigit() else _task_partition(group, prefix)
        if p is not None:
            out.add(transactional_id(prefix, p))
    return sorted(out)


def find_query_state(config: Mapping[str, Any], prefix: str) -> QueryState:
    """The marker groups and transactional ids of the sink with this prefix."""
    state = QueryState(prefix)
    with AdminClient(dict(config)) as admin:
        groups = admin.list_groups()
        state.groups = [g.group_id for g in groups if _is_marker_group(g.group_id, prefix)]
        try:
            listed = {t.transactional_id: t.state for t in admin.list_transactions()}
        except UnsupportedVersionError:
            unknown = "unknown (ListTransactions not supported)"
            listed = dict.fromkeys(_ids_of_groups(state.groups, prefix), unknown)
    state.transactional_ids = {
        tid: s for tid, s in sorted(listed.items()) if _task_partition(tid, prefix) is not None
    }
    return state


def forget_query_state(config: Mapping[str, Any], state: QueryState, timeout: float) -> None:
    """Abort and fence every transactional id of `state`, then delete its groups; failures
    are recorded in `state.errors`."""
    for tid in state.transactional_ids:
        producer = Producer({**config, "transactional.id": tid})
        try:
            producer.init_transactions(timeout)
        except (KafkaError, OSError) as exc:
            state.errors[tid] = f"InitProducerId failed: {exc}"
        finally:
            producer.close(timeout=0)
    if not state.groups:
        return
    with AdminClient(dict(config)) as admin:
        for group, code in admin.delete_groups(state.groups).items():
            if code not in (ErrorCode.NONE, ErrorCode.GROUP_ID_NOT_FOUND):
                state.errors[group] = f"DeleteGroups: {ErrorCode(code).name}"
