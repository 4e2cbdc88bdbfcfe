"""The console's "abort" action for a hanging transaction on one partition (KIP-664, what
`kafka-transactions.sh abort` does): the producer's state on the partition comes from
DescribeProducers (its epoch, the coordinator epoch, where its open transaction starts), and the
abort is an ABORT marker written through `AdminClient.abort_transaction` (WriteTxnMarkers).

Authorization is the broker's: the console asks as the identity it was given, and a broker
that refuses (Kafka: CLUSTER_ACTION on the cluster) answers an error code that the page shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.client.txn_admin import AbortTransactionSpec, ProducerState
from onceflow.common import TopicPartition
from onceflow.console.offsets import READ_COMMITTED
from onceflow.protocol.errors import ErrorCode


@dataclass(frozen=True)
class AbortTarget:
    """The open transaction of `producer_id` on `partition`; `producer` None when the
    partition has no open transaction of that producer (any more)."""

    partition: TopicPartition
    producer_id: int
    producer: ProducerState | None
    error: str | None = None


@dataclass(frozen=True)
class AbortOutcome:
    """What the broker answered: `error` None when the ABORT marker was written;
    `last_stable_offset` the partition's LSO afterwards (-1 when it could not be read)."""

    target: AbortTarget
    error: str | None
    last_stable_offset: int


def find_abort_target(admin: AdminClient, tp: TopicPartition, producer_id: int) -> AbortTarget:
    """The producer's open transaction on `tp`, as DescribeProducers reports it now."""
    found = admin.describe_producers([tp])[tp]
    if found.error_code != ErrorCode.NONE:
        name = ErrorCode(found.error_code).name
        return AbortTarget(tp, producer_id, None, f"DescribeProducers: {name}")
    producer = next(
        (
            p
            for p in found.producers
            if p.producer_id == producer_id and p.current_txn_start_offset >= 0
        ),
        None,
    )
    return AbortTarget(tp, producer_id, producer)


def abort_open_transaction(
    admin: AdminClient, tp: TopicPartition, producer_id: int
) -> AbortOutcome:
    """Look the producer up again and abort its open transaction on `tp`."""
    target = find_abort_target(admin, tp, producer_id)
    if target.producer is None:
        missing = f"producer {producer_id} has no open transaction on {tp.topic}-{tp.partition}"
        return AbortOutcome(target, target.error or missing, -1)
    p = target.producer
    code = admin.abort_transaction(
        AbortTransactionSpec(tp, p.producer_id, p.producer_epoch, p.coordinator_epoch)
    )
    error = None if code == ErrorCode.NONE else ErrorCode(code).name
    return AbortOutcome(target, error, _last_stable_offset(admin, tp))


def _last_stable_offset(admin: AdminClient, tp: TopicPartition) -> int:
    found = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=READ_COMMITTED)[tp]
    return found.offset if found.error_code == ErrorCode.NONE else -1
