"""AddPartitionsToTxn and AddOffsetsToTxn: partitions join the ongoing transaction.

The first partition added to an EMPTY/COMPLETE_* transaction starts it (ONGOING); partitions
already in the transaction need no append. KIP-890's verification (`verify_only`, v4+, and
Produce's synchronous check of a transactional batch) changes nothing and answers per partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from onceflow.common import TopicPartition
from onceflow.coordinator.internal_topics import GROUP_METADATA_TOPIC
from onceflow.coordinator.partitioning import coordinator_partition
from onceflow.coordinator.txn.state import TxnState
from onceflow.coordinator.txn.state_manager import TransactionStateManager
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "handle_add_offsets",
    "handle_add_partitions",
    "handle_add_partitions_batch",
    "verify_partitions",
]


async def handle_add_partitions(
    txns: TransactionStateManager,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    *,
    verify_only: bool = False,
) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn for one transaction: an error code per partition.

    Unknown partitions get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED
    (as Kafka's handler answers). `verify_only` (v4+, KIP-890 verification) changes nothing:
    NONE for partitions already in the ongoing transaction, INVALID_TXN_STATE otherwise."""
    parts = [TopicPartition(*tp) for tp in partitions]
    if verify_only:
        return verify_partitions(txns, transactional_id, producer_id, producer_epoch, parts)
    missing = {tp for tp in parts if txns.logs.get_log(tp.topic, tp.partition) is None}
    if missing:
        return {
            tp: (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if tp in missing
                else ErrorCode.OPERATION_NOT_ATTEMPTED
            )
            for tp in parts
        }
    error = await _add_partitions(txns, transactional_id, producer_id, producer_epoch, parts)
    return dict.fromkeys(parts, error)


async def handle_add_partitions_batch(
    txns: TransactionStateManager,
    transactions: Iterable[tuple[str, int, int, Iterable[TopicPartition], bool]],
) -> dict[str, dict[TopicPartition, ErrorCode]]:
    """AddPartitionsToTxn v4+: `(transactional_id, producer_id, epoch, partitions,
    verify_only)` per transaction, handled concurrently; results by transactional id."""
    entries = list(transactions)
    results = await asyncio.gather(
        *(
            handle_add_partitions(txns, tid, pid, epoch, parts, verify_only=verify)
            for tid, pid, epoch, parts, verify in entries
        )
    )
    return {entry[0]: result for entry, result in zip(entries, results, strict=True)}


async def handle_add_offsets(
    txns: TransactionStateManager,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    group_id: str,
) -> ErrorCode:
    """AddOffsetsToTxn: add the group's `__consumer_offsets` partition to the transaction."""
    info = txns.logs.topic(GROUP_METADATA_TOPIC)
    count = info.partitions if info else txns.config.offsets_topic_num_partitions
    tp = TopicPartition(GROUP_METADATA_TOPIC, coordinator_partition(group_id, count))
    return await _add_partitions(txns, transactional_id, producer_id, producer_epoch, [tp])


async def _add_partitions(
    txns: TransactionStateManager,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
) -> ErrorCode:
    error, md = txns.check_producer(transactional_id, producer_id, producer_epoch)
    if md is None:
        return error
    if md.pending_transition_in_progress or md.state in (
        TxnState.PREPARE_COMMIT,
        TxnState.PREPARE_ABORT,
    ):
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if md.state is TxnState.ONGOING and set(partitions) <= md.topic_partitions:
        return ErrorCode.NONE
    transit = md.prepare_add_partitions(partitions, txns.clock())
    return await txns.append(md, transit)


def verify_partitions(
    txns: TransactionStateManager,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """KIP-890 verification without an `await`: NONE for each partition already in the
    ongoing transaction, INVALID_TXN_STATE otherwise (or the producer's error for all)."""
    error, md = txns.check_producer(transactional_id, producer_id, producer_epoch)
    if md is not None and md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        error, md = ErrorCode.CONCURRENT_TRANSACTIONS, None
    if md is None:
        return dict.fromkeys(partitions, error)
    ongoing = md.state is TxnState.ONGOING
    return {
        tp: ErrorCode.NONE if ongoing and tp in md.topic_partitions else ErrorCode.INVALID_TXN_STATE
        for tp in partitions
    }
