"""The overview page's numbers: brokers, topics and partitions (Metadata), open and hanging
transactions, consumer groups with their total lag, and the throughput measured between polls
(`throughput`: every partition's high watermark, one ListOffsets per leader)."""

from __future__ import annotations

from dataclasses import dataclass, field

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.common import TopicPartition
from onceflow.console.broker_metrics import BrokerFigures
from onceflow.console.groups import list_group_rows
from onceflow.console.throughput import ThroughputHistory, ThroughputSample
from onceflow.console.transactions import OPEN_STATES
from onceflow.protocol.errors import ErrorCode


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
    throughput: list[ThroughputSample] = field(default_factory=list)
    broker_metrics: BrokerFigures | None = None  # onceflow's /metrics, when the console has it


def gather_overview(
    admin: AdminClient,
    now_ms: int,
    threshold_ms: int,
    throughput: ThroughputHistory | None = None,
) -> Overview:
    """Everything the overview shows (internal topics left out); with `throughput`, the high
    watermarks are read and recorded in it, and its samples shown."""
    brokers = [BrokerRow(b.node_id, b.host, b.port) for b in admin.describe_cluster()]
    described = admin.describe_topics()
    topics = [
        TopicSummary(name, len(d.partitions))
        for name, d in sorted(described.items())
        if not d.is_internal
    ]
    samples: list[ThroughputSample] = []
    if throughput is not None:
        if throughput.due(now_ms):  # else the last measurement stands: no ListOffsets
            tps = [TopicPartition(name, p.partition) for name, d in described.items()
                   if not d.is_internal for p in d.partitions]  # fmt: skip
            throughput.record(now_ms, high_watermarks(admin, tps))
        samples = throughput.samples()
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
        throughput=samples,
    )


def high_watermarks(admin: AdminClient, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Each partition's high watermark (those ListOffsets answered without an error)."""
    if not tps:
        return {}
    found = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()))
    return {tp: r.offset for tp, r in found.items() if r.error_code == ErrorCode.NONE}


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
