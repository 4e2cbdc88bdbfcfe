"""Transactions for `AdminClient` (KIP-664): list, describe, the producers of a partition, and
aborting a hanging transaction.

- `list_transactions` (Kafka's `Admin.listTransactions`): each broker answers for the
  transactional ids its coordinator partitions hold, so ListTransactions goes to every broker.
- `describe_transactions`: DescribeTransactions to each id's coordinator (FindCoordinator).
- `describe_producers`: DescribeProducers to the partition's leader (the caller groups).
- `abort_transaction` (Kafka's `Admin.abortTransaction`): an ABORT marker written with
  WriteTxnMarkers v1 to the partition's leader, for a transaction whose coordinator no longer
  knows it (a hanging transaction). Kafka lets clients with CLUSTER_ACTION on the cluster do
  it; the onceflow broker also wants `onceflow.admin.allow.write.txn.markers=true` and a
  loopback client.

A broker older than Kafka 3.0 does not know these APIs: `UnsupportedVersionError` (from the
connection).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from onceflow.client.admin_connections import (
    COORDINATOR_MOVED,
    TRANSACTION_KEY,
    AdminConnections,
    known_code,
    wait_retriable,
)
from onceflow.client.connection import BrokerConnection
from onceflow.client.errors import UnsupportedVersionError, raise_for_error
from onceflow.client.net.metadata import BrokerNode
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_producers import DescribeProducersRequest
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest
from onceflow.protocol.messages.list_transactions import ListTransactionsRequest
from onceflow.protocol.messages.write_txn_markers import WriteTxnMarkersRequest

__all__ = [
    "AbortTransactionSpec",
    "ProducerState",
    "ProducersResult",
    "TransactionDescription",
    "TransactionListing",
    "abort_transaction",
    "describe_producers",
    "describe_transactions",
    "list_transactions",
]

BATCH_IDS = 500  # transactional ids per DescribeTransactions request


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id as its coordinator lists it (`state`: Kafka's state name;
    `coordinator_id`: the node that listed it)."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int = -1


@dataclass(frozen=True)
class TransactionDescription:
    """A transactional id as its coordinator describes it (`state`: Kafka's state name;
    `error_code` set, and the rest empty, for an unknown id)."""

    transactional_id: str
    error_code: ErrorCode
    state: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    transaction_timeout_ms: int = -1
    transaction_start_time_ms: int = -1  # -1 when no transaction is open
    partitions: tuple[TopicPartition, ...] = ()
    coordinator_id: int = -1


@dataclass(frozen=True)
class ProducerState:
    """One producer with state on a partition (DescribeProducers):
    `current_txn_start_offset` is the first offset of its open transaction, -1 if none."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True)
class ProducersResult:
    """DescribeProducers for one partition."""

    error_code: ErrorCode
    producers: tuple[ProducerState, ...] = ()
    error_message: str | None = None


@dataclass(frozen=True)
class AbortTransactionSpec:
    """Which transaction to abort on which partition (Kafka's `AbortTransactionSpec`): the
    producer id and epoch and the coordinator epoch, as DescribeProducers reports them."""

    partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def describe_transactions(
    net: AdminConnections, transactional_ids: Iterable[str], timeout_s: float
) -> dict[str, TransactionDescription]:
    """DescribeTransactions for each id, at its coordinator. The coordinators are looked up in
    batches and each is asked about up to `BATCH_IDS` ids per request; an id answered with
    another error than TRANSACTIONAL_ID_NOT_FOUND is asked about again on its own (its
    coordinator looked up again when it moved, retried while loading)."""
    cls = DescribeTransactionsRequest
    deadline = time.monotonic() + timeout_s
    ids = list(dict.fromkeys(transactional_ids))
    net.find_coordinators(TRANSACTION_KEY, ids)
    by_node: dict[BrokerNode, list[str]] = {}
    for tid in ids:
        node = net.cached_coordinator(TRANSACTION_KEY, tid)
        if node is not None:
            by_node.setdefault(node, []).append(tid)
    out: dict[str, TransactionDescription] = {}
    for node, tids in by_node.items():
        for start in range(0, len(tids), BATCH_IDS):
            request = cls(transactional_ids=tids[start : start + BATCH_IDS])
            for state in net.to_node(node).send(request).transaction_states:
                if state.error_code in (ErrorCode.NONE, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND):
                    out[state.transactional_id] = _description(state, node)
    for tid in ids:
        if tid not in out:
            out[tid] = _describe_one(net, cls, tid, deadline)
    return {tid: out[tid] for tid in ids}


def _describe_one(
    net: AdminConnections, cls: Any, tid: str, deadline: float
) -> TransactionDescription:
    while True:
        node = net.coordinator(TRANSACTION_KEY, tid, deadline)
        response = net.to_node(node).send(cls(transactional_ids=[tid]))
        state = response.transaction_states[0]
        if state.error_code in COORDINATOR_MOVED:
            net.forget_coordinator(TRANSACTION_KEY, tid)
        if state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND or not wait_retriable(
            state.error_code, deadline, f"DescribeTransactions for {tid!r}"
        ):
            return _description(state, node)


def _description(state: Any, node: BrokerNode) -> TransactionDescription:
    """One DescribeTransactions answer of the coordinator `node`."""
    return TransactionDescription(
        state.transactional_id,
        known_code(state.error_code),
        state.transaction_state or "",
        state.producer_id,
        state.producer_epoch,
        state.transaction_timeout_ms,
        state.transaction_start_time_ms,
        tuple(TopicPartition(t.topic, p) for t in state.topics for p in t.partitions),
        node.node_id,
    )


def describe_producers(
    conn: BrokerConnection, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, ProducersResult]:
    """DescribeProducers for partitions led by the broker behind `conn`."""
    cls = DescribeProducersRequest
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    request = cls(
        topics=[cls.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()]
    )
    out = {}
    for topic in conn.send(request).topics:
        for p in topic.partitions:
            producers = tuple(
                ProducerState(
                    s.producer_id,
                    s.producer_epoch,
                    s.last_sequence,
                    s.last_timestamp,
                    s.coordinator_epoch,
                    s.current_txn_start_offset,
                )  # fmt: skip
                for s in p.active_producers
            )
            out[TopicPartition(topic.name, p.partition_index)] = ProducersResult(
                known_code(p.error_code), producers, p.error_message
            )
    return out


def abort_transaction(conn: BrokerConnection, spec: AbortTransactionSpec) -> ErrorCode:
    """WriteTxnMarkers (v1) with an ABORT marker for `spec`, to the partition's leader behind
    `conn`; the partition's error code."""
    cls = WriteTxnMarkersRequest
    tp = spec.partition
    marker = cls.WritableTxnMarker(
        producer_id=spec.producer_id,
        producer_epoch=spec.producer_epoch,
        transaction_result=False,
        topics=[cls.WritableTxnMarker.WritableTxnMarkerTopic(name=tp.topic,
                                                             partition_indexes=[tp.partition])],
        coordinator_epoch=spec.coordinator_epoch,
    )  # fmt: skip
    response = conn.send(cls(markers=[marker]), 1)
    for result in response.markers:
        for topic in result.topics:
            for p in topic.partitions:
                if topic.name == tp.topic and p.partition_index == tp.partition:
                    return known_code(p.error_code)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def list_transactions(
    net: AdminConnections,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    min_duration_ms: int = -1,
) -> list[TransactionListing]:
    """Every transactional id on every broker, sorted by id; only those in one of `states`
    (Kafka's names), of one of `producer_ids`, or open at least `min_duration_ms` (KIP-994,
    ListTransactions v1) when given. A state name the brokers do not know is a `ValueError`."""
    cls = ListTransactionsRequest
    request = cls(
        state_filters=list(states),
        producer_id_filters=list(producer_ids),
        duration_filter=min_duration_ms,
    )
    out: dict[str, TransactionListing] = {}
    for node in net.metadata([])[0]:
        conn = net.to_node(node)
        if min_duration_ms >= 0 and conn.api_version(ApiKey.LIST_TRANSACTIONS) < 1:
            raise UnsupportedVersionError(
                f"broker {node.node_id} cannot filter transactions by duration "
                "(ListTransactions v1, Kafka 3.8+)"
            )
        response = conn.send(request)
        if response.error_code != ErrorCode.NONE:
            raise_for_error(response.error_code, "ListTransactions")
        if response.unknown_state_filters:
            raise ValueError(f"unknown transaction states: {response.unknown_state_filters}")
        for t in response.transaction_states:
            out[t.transactional_id] = TransactionListing(
                t.transactional_id, t.producer_id, t.transaction_state, node.node_id
            )
    return [out[t] for t in sorted(out)]
