"""The overview page's numbers: brokers, topics and partitions (Metadata), open and hanging
transactions, and consumer groups with their total lag."""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.client.admin import AdminClient
from onceflow.console.groups import list_group_rows
from onceflow.console.transactions import OPEN_STATES


@dataclass(frozen=True)
class BrokerRow:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class TopicSummary:
    topic: str
    partitions: int


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    state: str
    members: int
    total_lag: int


@dataclass(frozen=True)
class Overview:
    brokers: list[BrokerRow]
    topic_count: int
    partition_count: int
    topics: list[TopicSummary]
    open_transactions: int
    hanging_transactions: int
    hanging_threshold_ms: int
    groups: list[GroupLag]


def gather_overview(admin: AdminClient, now_ms: int, threshold_ms: int) -> Overview:
    """Everything the overview shows (internal topics left out)."""
    brokers = [BrokerRow(b.node_id, b.host, b.port) for b in admin.describe_cluster()]
    described = admin.describe_topics()
    topics = [
        TopicSummary(name, len(d.partitions))
        for name, d in sorted(described.items())
        if not d.is_internal
    ]
    open_count, hanging_count = count_open_and_hanging(admin, now_ms, threshold_ms)
    groups = [
        GroupLag(g.group_id, g.state, len(g.members), g.total_lag) for g in list_group_rows(admin)
    ]
    return Overview(
        brokers=sorted(brokers, key=lambda b: b.node_id),
        topic_count=len(topics),
        partition_count=sum(t.partitions for t in topics),
        topics=topics,
        open_transactions=open_count,
        hanging_transactions=hanging_count,
        hanging_threshold_ms=threshold_ms,
        groups=groups,
    )


def count_open_and_hanging(admin: AdminClient, now_ms: int, threshold_ms: int) -> tuple[int, int]:
    """(open transactions, those open longer than `threshold_ms`): ListTransactions filtered
    to the open states, then only those ids are described (for their start time); with
    10 000 ids of which a tenth are open that is a tenth of the DescribeTransactions work."""
    listed = admin.list_transactions(states=sorted(OPEN_STATES))
    open_ids = sorted({t.transactional_id for t in listed if t.state in OPEN_STATES})
    if not open_ids:
        return 0, 0
    still_open = [
        d for d in admin.describe_transactions(open_ids).values()
        if d.state in OPEN_STATES and d.transaction_start_time_ms >= 0
    ]  # fmt: skip
    hanging = sum(1 for d in still_open if now_ms - d.transaction_start_time_ms > threshold_ms)
    return len(still_open), hanging
