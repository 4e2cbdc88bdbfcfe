"""A topic's partitions: offsets, the producers with state on each (DescribeProducers) and the
open transaction that pins the last stable offset.

The LSO of a partition is the first offset of its oldest open transaction, so the producer
whose `current_txn_start_offset` equals the LSO (while the LSO trails the high watermark) is
the one holding read_committed consumers back; its transactional id comes from
ListTransactions, which names each id's current producer id. A partition's size is its
leader's answer to DescribeLogDirs (blank when the cluster refuses or lacks that API).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from onceflow.client.admin import AdminClient
from onceflow.client.error_base import KafkaError
from onceflow.client.errors import BrokerResponseError
from onceflow.client.txn_admin import ProducerState
from onceflow.common import TopicPartition
from onceflow.console.broker_metrics import TopicFigures
from onceflow.console.offsets import PartitionOffsets, partition_offsets
from onceflow.protocol.errors import ErrorCode


class UnknownTopic(LookupError):
    """The cluster has no topic of that name."""


@dataclass(frozen=True)
class ProducerRow:
    """A producer with state on a partition; `transactional_id` is None when it has none (or
    its id has moved on to another producer id)."""

    producer_id: int
    producer_epoch: int
    transactional_id: str | None
    last_sequence: int
    last_timestamp: int
    current_txn_start_offset: int


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    lso_lag: int
    producers: list[ProducerRow]
    pinned_by: ProducerRow | None  # the open transaction the LSO waits for
    error: str | None = None
    # how long the LSO has waited: the age of the pinning transaction (DescribeTransactions'
    # start time); None when nothing pins it or the pinning producer has no transactional id
    lso_lag_ms: int | None = None
    size_bytes: int | None = None  # the leader's log size (DescribeLogDirs); None: unknown


@dataclass(frozen=True)
class TopicView:
    topic: str
    partitions: list[PartitionRow]
    broker_metrics: TopicFigures | None = None  # onceflow's /metrics, when the console has it


def producer_transactional_ids(admin: AdminClient) -> dict[int, str]:
    """Producer id -> the transactional id that currently uses it."""
    return {t.producer_id: t.transactional_id for t in admin.list_transactions()}


def describe_topic(admin: AdminClient, topic: str, now_ms: int) -> TopicView:
    """Offsets, producers and LSO pin of every partition of `topic` (`UnknownTopic` if none)."""
    description = admin.describe_topics([topic]).get(topic)
    if description is None or description.error_code != ErrorCode.NONE:
        raise UnknownTopic(topic)
    tps = [TopicPartition(topic, p.partition) for p in description.partitions]
    offsets = partition_offsets(admin, tps)
    producers = admin.describe_producers(tps)
    txn_ids = producer_transactional_ids(admin)
    leaders = {TopicPartition(topic, p.partition): p.leader for p in description.partitions}
    sizes = partition_sizes(admin, leaders)
    rows = []
    for p in sorted(description.partitions, key=lambda p: p.partition):
        tp = TopicPartition(topic, p.partition)
        found = producers[tp]
        states = [_producer_row(s, txn_ids) for s in found.producers]
        row = _partition_row(p.partition, p.leader, offsets[tp], states, found.error_code)
        rows.append(replace(row, size_bytes=sizes.get(tp)))
    return TopicView(topic, _with_lso_lag_ms(admin, rows, now_ms))


def partition_sizes(
    admin: AdminClient, leaders: dict[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Each partition's size in bytes on its leader (`leaders`: partition -> leader id), from
    DescribeLogDirs asked of the leaders only; partitions whose size is unknown are left out
    (a broker that refuses or does not serve DescribeLogDirs answers none)."""
    try:
        answers = admin.describe_log_dirs(set(leaders.values()), list(leaders))
    except (KafkaError, BrokerResponseError):  # refused (no DESCRIBE on the cluster), or old
        return {}
    sizes = {}
    for tp, leader in leaders.items():
        for log_dir in answers.get(leader, []):
            replica = log_dir.replicas.get(tp)
            if replica is not None and not replica.is_future:
                sizes[tp] = replica.size
    return sizes


def _with_lso_lag_ms(
    admin: AdminClient, rows: list[PartitionRow], now_ms: int
) -> list[PartitionRow]:
    pinning = {r.pinned_by.transactional_id for r in rows if r.pinned_by is not None} - {None}
    if not pinning:
        return rows
    described = admin.describe_transactions(sorted(t for t in pinning if t is not None))
    started = {
        tid: d.transaction_start_time_ms
        for tid, d in described.items()
        if d.error_code == ErrorCode.NONE and d.transaction_start_time_ms >= 0
    }
    out = []
    for row in rows:
        tid = None if row.pinned_by is None else row.pinned_by.transactional_id
        start = started.get(tid) if tid is not None else None
        out.append(row if start is None else replace(row, lso_lag_ms=now_ms - start))
    return out


def _producer_row(state: ProducerState, txn_ids: dict[int, str]) -> ProducerRow:
    return ProducerRow(
        state.producer_id, state.producer_epoch, txn_ids.get(state.producer_id),
        state.last_sequence, state.last_timestamp, state.current_txn_start_offset,
    )  # fmt: skip


def _partition_row(
    partition: int,
    leader: int,
    offsets: PartitionOffsets,
    producers: list[ProducerRow],
    producers_error: ErrorCode,
) -> PartitionRow:
    lso = offsets.last_stable_offset
    pinned = None
    if offsets.lso_lag > 0:
        pinned = next((p for p in producers if p.current_txn_start_offset == lso), None)
    error = offsets.error
    if error is None and producers_error != ErrorCode.NONE:
        error = f"DescribeProducers: {ErrorCode(producers_error).name}"
    return PartitionRow(
        partition, leader, offsets.log_start_offset, offsets.high_watermark, lso,
        offsets.lso_lag, producers, pinned, error,
    )  # fmt: skip
