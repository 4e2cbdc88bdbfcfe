"""DescribeTransactions and ListTransactions over the coordinator's transactional ids (KIP-664).

Pure functions over a mapping of `TransactionMetadata`; the coordinator calls them with its
cache. The abort of a hanging transaction is a log-side write (`markers.write_marker`), exposed
as `TransactionCoordinator.abort_hanging_transaction`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from onceflow.coordinator.txn.metadata import TransactionMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "ListedTransaction",
    "ListTransactionsResult",
    "TransactionDescription",
    "describe_transactions",
    "list_transactions",
]


@dataclass(frozen=True)
class TransactionDescription:
    """One entry of a DescribeTransactions response."""

    error: ErrorCode
    transactional_id: str
    state: str = ""  # Kafka's state name ("Ongoing", ...)
    txn_timeout_ms: int = 0
    txn_start_timestamp: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    topics: Mapping[str, list[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ListedTransaction:
    """One entry of a ListTransactions response."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListTransactionsResult:
    """A ListTransactions response: error, state filters Kafka does not know, the matches."""

    error: ErrorCode
    unknown_state_filters: list[str]
    transactions: list[ListedTransaction]


def describe_transactions(
    txns: Mapping[str, TransactionMetadata], transactional_ids: Iterable[str]
) -> list[TransactionDescription]:
    """Describe each id; TRANSACTIONAL_ID_NOT_FOUND for unknown (or expiring) ids."""
    out = []
    for tid in transactional_ids:
        md = txns.get(tid)
        if md is None or md.state is TxnState.DEAD or md.pending_state is TxnState.DEAD:
            out.append(TransactionDescription(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, tid))
            continue
        topics: dict[str, list[int]] = {}
        for tp in sorted(md.topic_partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        out.append(
            TransactionDescription(
                ErrorCode.NONE,
                tid,
                md.state.kafka_name,
                md.txn_timeout_ms,
                md.txn_start_timestamp,
                md.producer_id,
                md.producer_epoch,
                topics,
            )
        )
    return out


def list_transactions(
    txns: Mapping[str, TransactionMetadata],
    state_filters: Iterable[str] = (),
    producer_id_filters: Iterable[int] = (),
    duration_filter_ms: int = -1,
    now_ms: int = 0,
) -> ListTransactionsResult:
    """Kafka's ListTransactions: every filter given must match; DEAD ids are never listed;
    `duration_filter_ms` >= 0 keeps transactions open longer than that."""
    names = list(state_filters)
    states = {TxnState.from_kafka_name(name) for name in names} - {None}
    unknown = [name for name in names if TxnState.from_kafka_name(name) is None]
    pids = set(producer_id_filters)
    listed = []
    for tid in sorted(txns):
        md = txns[tid]
        if md.state is TxnState.DEAD:
            continue
        if pids and md.producer_id not in pids:
            continue
        if names and md.state not in states:
            continue
        if duration_filter_ms >= 0 and now_ms - md.txn_start_timestamp <= duration_filter_ms:
            continue
        listed.append(ListedTransaction(tid, md.producer_id, md.state.kafka_name))
    return ListTransactionsResult(ErrorCode.NONE, unknown, listed)
