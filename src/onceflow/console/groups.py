"""Consumer groups: state, members with their assignment, and per partition the committed
offset against the last stable offset (the lag a read_committed consumer can still catch up).

The Spark sink's marker groups (`onceflow-markers.*`) are left to `markers`: their offsets are
batch ids, not positions in a topic. Offsets are read without requireStable, so a group whose
offsets sit in an open transaction shows its last committed ones instead of waiting.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.client.admin import AdminClient
from onceflow.common import TopicPartition
from onceflow.console.offsets import PartitionOffsets, partition_offsets
from onceflow.spark.markers import GROUP_PREFIX


@dataclass(frozen=True)
class MemberRow:
    member_id: str
    client_id: str
    host: str
    assignment: list[str]


@dataclass(frozen=True)
class GroupOffsetRow:
    """`lag` is last_stable_offset - committed_offset (None when either is unknown)."""

    topic: str
    partition: int
    committed_offset: int
    last_stable_offset: int
    lag: int | None


@dataclass(frozen=True)
class GroupRow:
    group_id: str
    state: str
    protocol_type: str
    members: list[MemberRow]
    offsets: list[GroupOffsetRow]
    total_lag: int


def list_group_rows(admin: AdminClient) -> list[GroupRow]:
    """Every consumer group but the marker groups, sorted by id."""
    ids = sorted(g.group_id for g in admin.list_groups() if not g.group_id.startswith(GROUP_PREFIX))
    if not ids:
        return []
    described = admin.describe_groups(ids)
    committed = {
        gid: admin.list_consumer_group_offsets(gid, None, require_stable=False) for gid in ids
    }
    tps = {tp for found in committed.values() for tp in found}
    offsets = partition_offsets(admin, sorted(tps))
    rows = []
    for gid in ids:
        d = described.get(gid)
        members = [] if d is None else [
            MemberRow(m.member_id, m.client_id, m.host, [f"{t}-{p}" for t, p in m.assignment])
            for m in d.members
        ]  # fmt: skip
        lags = [_offset_row(tp, c[0], offsets[tp]) for tp, c in sorted(committed[gid].items())
                if c is not None]  # fmt: skip
        rows.append(
            GroupRow(
                gid, "" if d is None else d.state, "" if d is None else d.protocol_type,
                members, lags, sum(r.lag for r in lags if r.lag is not None),
            )
        )  # fmt: skip
    return rows


def _offset_row(tp: TopicPartition, committed: int, offsets: PartitionOffsets) -> GroupOffsetRow:
    lso = offsets.last_stable_offset
    lag = None if offsets.error is not None or committed < 0 else max(lso - committed, 0)
    return GroupOffsetRow(tp.topic, tp.partition, committed, lso, lag)
