"""Records of `__transaction_state` (Kafka's `TransactionLog`): keys, values and tombstones.

A record key is an int16 key version (0) followed by `TransactionLogKey`; the value is an int16
value version (onceflow writes 1, the flexible one, and reads 0 and 1) followed by
`TransactionLogValue`, or null: a tombstone that removes the transactional id. Partitions are
grouped by topic in the value, sorted so the encoding of a state is deterministic.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from onceflow.common import TopicPartition
from onceflow.coordinator.txn.metadata import TxnTransitMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.internal import TransactionLogKey, TransactionLogValue
from onceflow.records.batch import iter_batches
from onceflow.records.builder import BatchBuilder
from onceflow.records.record import decode_records

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "build_state_batch",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "iter_state_records",
]

KEY_VERSION = 0
VALUE_VERSION = 1
_VERSION = struct.Struct(">h")


def encode_key(transactional_id: str) -> bytes:
    """The record key of a transactional id."""
    key = TransactionLogKey(transactional_id=transactional_id)
    return _VERSION.pack(KEY_VERSION) + key.encode(KEY_VERSION)


def decode_key(data: bytes | memoryview) -> str:
    """The transactional id of a record key; raises DecodeError for an unknown key version."""
    if len(data) < _VERSION.size:
        raise DecodeError("transaction log key shorter than its version")
    (version,) = _VERSION.unpack_from(data)
    if version != KEY_VERSION:
        raise DecodeError(f"unknown transaction log key version {version}")
    return TransactionLogKey.decode(memoryview(data)[_VERSION.size :], version).transactional_id


def encode_value(transit: TxnTransitMetadata) -> bytes | None:
    """The record value of a state; None (a tombstone) for DEAD."""
    if transit.txn_state is TxnState.DEAD:
        return None
    by_topic: dict[str, list[int]] = {}
    for tp in transit.topic_partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    value = TransactionLogValue(
        producer_id=transit.producer_id,
        previous_producer_id=transit.previous_producer_id,
        next_producer_id=transit.next_producer_id,
        producer_epoch=transit.producer_epoch,
        client_transaction_version=transit.client_transaction_version,
        last_producer_epoch=transit.last_producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=int(transit.txn_state),
        transaction_partitions=[
            TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=sorted(ids))
            for topic, ids in sorted(by_topic.items())
        ],
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
    )
    return _VERSION.pack(VALUE_VERSION) + value.encode(VALUE_VERSION)


def decode_value(data: bytes | memoryview | None) -> TxnTransitMetadata | None:
    """The state in a record value; None for a tombstone. Raises DecodeError when malformed."""
    if data is None:
        return None
    if len(data) < _VERSION.size:
        raise DecodeError("transaction log value shorter than its version")
    (version,) = _VERSION.unpack_from(data)
    lo, hi = TransactionLogValue.VALID_VERSIONS
    if not lo <= version <= hi:
        raise DecodeError(f"unknown transaction log value version {version}")
    value = TransactionLogValue.decode(memoryview(data)[_VERSION.size :], version)
    try:
        state = TxnState(value.transaction_status)
    except ValueError:
        raise DecodeError(f"unknown transaction status {value.transaction_status}") from None
    partitions = frozenset(
        TopicPartition(p.topic, index)
        for p in value.transaction_partitions or ()
        for index in p.partition_ids
    )
    return TxnTransitMetadata(
        producer_id=value.producer_id,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        producer_epoch=value.producer_epoch,
        last_producer_epoch=value.last_producer_epoch,
        txn_timeout_ms=value.transaction_timeout_ms,
        txn_state=state,
        topic_partitions=partitions,
        txn_start_timestamp=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
        client_transaction_version=value.client_transaction_version,
    )


def build_state_batch(transactional_id: str, transit: TxnTransitMetadata, now_ms: int) -> bytes:
    """A one-record batch holding the new state of `transactional_id` (no producer id)."""
    builder = BatchBuilder()
    builder.append(now_ms, encode_key(transactional_id), encode_value(transit))
    return bytes(builder.build())


def iter_state_records(
    records: bytes | memoryview,
) -> Iterator[tuple[int, str, TxnTransitMetadata | None]]:
    """`(offset, transactional_id, state or None for a tombstone)` for each record of a record
    set read from `__transaction_state`. Control batches are skipped; raises DecodeError or
    CorruptRecordError on damage."""
    for header, view in iter_batches(records):
        if header.is_control:
            continue
        for record in decode_records(view):
            if record.key is None:
                raise DecodeError("transaction log record without a key")
            offset = header.base_offset + record.offset_delta
            yield offset, decode_key(record.key), decode_value(record.value)
