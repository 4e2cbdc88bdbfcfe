"""The transactional producer's coordinator requests: one class per request kind, no I/O.

Each class is one of Kafka's `TxnRequestHandler`s (the base is `request.TxnRequest`) and
holds for its kind:

- `build(txn, version)`: the Kafka request, at the version the sender negotiated under the
  class's `MAX_VERSION` (the caps of transaction version 1, below);
- `parse(response, version)`: the answer's error codes (one under the key None, or one per
  partition) and its data;
- `ERRORS`: its error table, error code -> `TxnAction`, after Kafka's response handler for
  the kind; a code not in the table is FATAL (Kafka's "unexpected error");
- `on_success(txn, fields)`: what a successful answer does to the producer's transaction;

and where a kind differs from the rest: `on_retry` (TxnOffsetCommit retries only its failed
partitions), `on_failure` (AddPartitionsToTxn releases its partitions) and `error_for`
(TxnOffsetCommit's group-metadata mismatch is a `CommitFailedError`). The manager decides
what an action means for the producer's state (`states`); the sender does the I/O.

Requests go out one at a time in priority order (Kafka's `TransactionManager.Priority`):
FindCoordinator < InitProducerId < AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit <
EndTxn, then in the order they were queued.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final, TypeVar

from onceflow.client.errors import CommitFailedError, KafkaError
from onceflow.client.net.coordinator_lookup import (
    FIND_COORDINATOR_MAX,
    GROUP,
    find_coordinator_request,
    parse_coordinator,
)
from onceflow.client.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from onceflow.client.producer.states import ProducerState
from onceflow.client.producer.txn.request import (
    AnyTxnRequest,
    ErrorCodes,
    TransactionalRequestResult,
    TransactionContext,
    TxnAction,
    TxnRequest,
    TxnRequestKind,
    error_table,
)
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.message import Message
from onceflow.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from onceflow.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from onceflow.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from onceflow.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from onceflow.protocol.messages.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from onceflow.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

__all__ = [
    "END_TXN_TV1_MAX",
    "PRODUCE_TV1_MAX",
    "REQUEST_TYPES",
    "TXN_OFFSET_COMMIT_TV1_MAX",
    "AddOffsetsToTxn",
    "AddPartitionsToTxn",
    "EndTxn",
    "FindCoordinator",
    "InitProducerId",
    "TxnOffsetCommit",
]

# The client speaks transaction version 1 (KIP-890 part 1: the epoch is bumped only on
# recovery), so, as the message specs require, it never uses the versions that mean
# version 2 (the broker then adds partitions and offsets implicitly): within a transaction
# Produce stays <= v11, TxnOffsetCommit <= v4 and EndTxn <= v4.
PRODUCE_TV1_MAX: Final = 11
TXN_OFFSET_COMMIT_TV1_MAX: Final = 4
END_TXN_TV1_MAX: Final = 4
_ADD_PARTITIONS_CLIENT_MAX: Final = 3  # v4+ is the brokers' batched verification form (KIP-890)
_INIT_PRODUCER_ID_MAX: Final = 5
_INIT_WITH_PRODUCER_ID_VERSION = 3  # v3+ carries the id and epoch to bump (KIP-360)

_A = TxnAction
_R = TypeVar("_R", bound=Message)
_OffsetTopic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
_OffsetPartition = _OffsetTopic.TxnOffsetCommitRequestPartition
_E = ErrorCode

# error-table parts several kinds share
_COORDINATOR_MOVED = {
    _E.NOT_COORDINATOR: _A.LOOKUP,
    _E.COORDINATOR_NOT_AVAILABLE: _A.LOOKUP,
    _E.REQUEST_TIMED_OUT: _A.LOOKUP,
    _E.NETWORK_EXCEPTION: _A.LOOKUP,
    _E.COORDINATOR_LOAD_IN_PROGRESS: _A.RETRY,
}
_FATAL = {
    _E.PRODUCER_FENCED: _A.FENCED,
    _E.INVALID_PRODUCER_EPOCH: _A.FENCED,
    _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _A.FATAL,
    _E.CLUSTER_AUTHORIZATION_FAILED: _A.FATAL,
    _E.UNSUPPORTED_VERSION: _A.FATAL,
    _E.UNSUPPORTED_FOR_MESSAGE_FORMAT: _A.FATAL,
    _E.INVALID_TXN_STATE: _A.FATAL,
}
_LOST_PRODUCER_ID = {
    _E.UNKNOWN_PRODUCER_ID: _A.ABORTABLE,
    _E.INVALID_PRODUCER_ID_MAPPING: _A.ABORTABLE,
    _E.TRANSACTION_ABORTABLE: _A.ABORTABLE,
}
# the requests made within a transaction: any of those, and a competing transition retries
_IN_TRANSACTION = error_table(
    _COORDINATOR_MOVED, _FATAL, _LOST_PRODUCER_ID, {_E.CONCURRENT_TRANSACTIONS: _A.RETRY}
)
# a partition the coordinator does not know yet (metadata still propagating) is retried
_TOPIC_RETRY = {_E.UNKNOWN_TOPIC_OR_PARTITION: _A.RETRY}


class FindCoordinator(TxnRequest[FindCoordinatorResponse]):
    """Find the coordinator of `key`: (TRANSACTION, transactional id) or (GROUP, group id)."""

    KIND = TxnRequestKind.FIND_COORDINATOR
    API_KEY = ApiKey.FIND_COORDINATOR
    MAX_VERSION = FIND_COORDINATOR_MAX
    ERRORS = error_table(
        {
            _E.COORDINATOR_NOT_AVAILABLE: _A.RETRY,
            _E.COORDINATOR_LOAD_IN_PROGRESS: _A.RETRY,
            _E.NOT_COORDINATOR: _A.RETRY,
            _E.REQUEST_TIMED_OUT: _A.RETRY,
            _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _A.FATAL,
            _E.GROUP_AUTHORIZATION_FAILED: _A.ABORTABLE,
        }
    )

    def __init__(self, key: tuple[int, str], result: TransactionalRequestResult | None = None):
        super().__init__(result)
        self.key = key

    def coordinator_key(self, txn: TransactionContext) -> tuple[int, str]:
        return self.key

    def target(self, txn: TransactionContext) -> None:
        return None

    def build(self, txn: TransactionContext, version: int) -> FindCoordinatorRequest:
        return find_coordinator_request(version, *self.key)

    def parse(
        self, response: FindCoordinatorResponse, version: int
    ) -> tuple[ErrorCodes, dict[str, Any]]:
        code, node_id, host, port = parse_coordinator(response, version)
        return {None: code}, {"node_id": node_id, "host": host, "port": port}

    def on_success(self, txn: TransactionContext, fields: Mapping[str, Any]) -> None:
        txn.coordinators[self.key] = (fields["node_id"], fields["host"], fields["port"])
        self.result.complete()


class InitProducerId(TxnRequest[InitProducerIdResponse]):
    """Get a producer id and epoch: a fresh one (-1/-1), or the epoch of this one bumped."""

    KIND = TxnRequestKind.INIT_PRODUCER_ID
    API_KEY = ApiKey.INIT_PRODUCER_ID
    MAX_VERSION = _INIT_PRODUCER_ID_MAX
    ERRORS = error_table(_COORDINATOR_MOVED, _FATAL, {_E.CONCURRENT_TRANSACTIONS: _A.RETRY})

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int,
        result: TransactionalRequestResult | None = None,
    ):
        super().__init__(result)
        self.producer_id, self.producer_epoch = producer_id, producer_epoch

    def build(self, txn: TransactionContext, version: int) -> InitProducerIdRequest:
        message = InitProducerIdRequest(
            transactional_id=txn.transactional_id,
            transaction_timeout_ms=txn.transaction_timeout_ms,
        )
        if version >= _INIT_WITH_PRODUCER_ID_VERSION:
            message.producer_id, message.producer_epoch = self.producer_id, self.producer_epoch
        return message

    def parse(
        self, response: InitProducerIdResponse, version: int
    ) -> tuple[ErrorCodes, dict[str, Any]]:
        fields = {"producer_id": response.producer_id, "producer_epoch": response.producer_epoch}
        return {None: response.error_code}, fields

    def on_success(self, txn: TransactionContext, fields: Mapping[str, Any]) -> None:
        txn.transition_to(ProducerState.READY)
        txn.producer_id, txn.producer_epoch = fields["producer_id"], fields["producer_epoch"]
        txn.epoch_bump_required = False
        txn.reset_sequences()
        txn.clear_transaction()
        self.result.complete()


class AddPartitionsToTxn(TxnRequest[AddPartitionsToTxnResponse]):
    """Add `partitions` to the transaction before batches go to them."""

    KIND = TxnRequestKind.ADD_PARTITIONS_TO_TXN
    API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
    MAX_VERSION = _ADD_PARTITIONS_CLIENT_MAX
    ERRORS = error_table(
        _IN_TRANSACTION,
        _TOPIC_RETRY,
        {_E.OPERATION_NOT_ATTEMPTED: _A.RETRY, _E.TOPIC_AUTHORIZATION_FAILED: _A.ABORTABLE},
    )

    def __init__(
        self,
        partitions: frozenset[tuple[str, int]],
        result: TransactionalRequestResult | None = None,
    ):
        super().__init__(result)
        self.partitions = partitions

    def build(self, txn: TransactionContext, version: int) -> AddPartitionsToTxnRequest:
        cls = AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return cls(
            v3_and_below_transactional_id=txn.transactional_id,
            v3_and_below_producer_id=txn.producer_id,
            v3_and_below_producer_epoch=txn.producer_epoch,
            v3_and_below_topics=[
                cls.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )

    def parse(
        self, response: AddPartitionsToTxnResponse, version: int
    ) -> tuple[ErrorCodes, dict[str, Any]]:
        codes = _unanswered(self.partitions)
        for topic in response.results_by_topic_v3_and_below:
            for p in topic.results_by_partition:
                codes[(topic.name, p.partition_index)] = p.partition_error_code
        return codes, {}

    def on_success(self, txn: TransactionContext, fields: Mapping[str, Any]) -> None:
        txn.pending_partitions -= self.partitions
        txn.partitions_in_transaction |= self.partitions
        txn.transaction_started = True

    def on_failure(self, txn: TransactionContext) -> None:
        txn.pending_partitions -= self.partitions


class _GroupOffsets(TxnRequest[_R]):
    """A request about a consumer group's offsets within the transaction."""

    def __init__(
        self,
        group: ConsumerGroupMetadata,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        result: TransactionalRequestResult | None = None,
    ) -> None:
        super().__init__(result)
        self.group, self.offsets = group, offsets


class AddOffsetsToTxn(_GroupOffsets[AddOffsetsToTxnResponse]):
    """Add the group's offsets partition to the transaction; TxnOffsetCommit follows."""

    KIND = TxnRequestKind.ADD_OFFSETS_TO_TXN
    API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
    ERRORS = error_table(_IN_TRANSACTION, {_E.GROUP_AUTHORIZATION_FAILED: _A.ABORTABLE})

    def build(self, txn: TransactionContext, version: int) -> AddOffsetsToTxnRequest:
        return AddOffsetsToTxnRequest(
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            group_id=self.group.group_id,
        )

    def parse(
        self, response: AddOffsetsToTxnResponse, version: int
    ) -> tuple[ErrorCodes, dict[str, Any]]:
        return {None: response.error_code}, {}

    def on_success(self, txn: TransactionContext, fields: Mapping[str, Any]) -> None:
        txn.transaction_started = True
        txn.enqueue(TxnOffsetCommit(self.group, self.offsets, self.result))


class TxnOffsetCommit(_GroupOffsets[TxnOffsetCommitResponse]):
    """Commit `offsets` for the group within the transaction (sent to the group coordinator)."""

    KIND = TxnRequestKind.TXN_OFFSET_COMMIT
    API_KEY = ApiKey.TXN_OFFSET_COMMIT
    MAX_VERSION = TXN_OFFSET_COMMIT_TV1_MAX
    ERRORS = error_table(
        _IN_TRANSACTION,
        _TOPIC_RETRY,
        {
            _E.UNKNOWN_MEMBER_ID: _A.ABORTABLE,
            _E.ILLEGAL_GENERATION: _A.ABORTABLE,
            _E.FENCED_INSTANCE_ID: _A.ABORTABLE,
            _E.GROUP_AUTHORIZATION_FAILED: _A.ABORTABLE,
        },
    )
    # a group-metadata mismatch: the member is no longer the one the offsets came from
    _COMMIT_FAILED: ClassVar[frozenset[ErrorCode]] = frozenset(
        {_E.UNKNOWN_MEMBER_ID, _E.ILLEGAL_GENERATION}
    )

    def coordinator_key(self, txn: TransactionContext) -> tuple[int, str]:
        return (GROUP, self.group.group_id)

    def build(self, txn: TransactionContext, version: int) -> TxnOffsetCommitRequest:
        by_topic: dict[str, list[_OffsetPartition]] = {}
        for (topic, partition), committed in sorted(self.offsets.items()):
            by_topic.setdefault(topic, []).append(
                _OffsetPartition(
                    partition_index=partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        group = self.group
        return TxnOffsetCommitRequest(
            transactional_id=txn.transactional_id,
            group_id=group.group_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[_OffsetTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

    def parse(
        self, response: TxnOffsetCommitResponse, version: int
    ) -> tuple[ErrorCodes, dict[str, Any]]:
        codes = _unanswered(self.offsets)
        for topic in response.topics:
            for p in topic.partitions:
                codes[(topic.name, p.partition_index)] = p.error_code
        return codes, {}

    def on_success(self, txn: TransactionContext, fields: Mapping[str, Any]) -> None:
        self.result.complete()

    def on_retry(self, error_codes: ErrorCodes) -> None:
        """Only the partitions that failed go out again."""
        self.offsets = {tp: o for tp, o in self.offsets.items() if error_codes.get(tp, 0) != 0}

    def error_for(self, action: TxnAction, code: int, txn: TransactionContext) -> KafkaError:
        if action is not TxnAction.FENCED and code in self._COMMIT_FAILED:
            return CommitFailedError(
                "Transaction offset Commit failed due to consumer group metadata mismatch: "
                f"{ErrorCode(code).name}"
            )
        return super().error_for(action, code, txn)


class EndTxn(TxnRequest[EndTxnResponse]):
    """Commit (`committed`) or abort the transaction; after an abort that left a sequence
    gap, InitProducerId bumps the epoch before the producer is READY (KIP-360)."""

    KIND = TxnRequestKind.END_TXN
    API_KEY = ApiKey.END_TXN
    MAX_VERSION = END_TXN_TV1_MAX
    ERRORS = _IN_TRANSACTION

    def __init__(self, committed: bool, result: TransactionalRequestResult | None = None):
        super().__init__(result)
        self.committed = committed

    def build(self, txn: TransactionContext, version: int) -> EndTxnRequest:
        return EndTxnRequest(
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            committed=self.committed,
        )

    def parse(self, response: EndTxnResponse, version: int) -> tuple[ErrorCodes, dict[str, Any]]:
        return {None: response.error_code}, {}

    def on_success(self, txn: TransactionContext, fields: Mapping[str, Any]) -> None:
        if not self.committed and txn.epoch_bump_required:
            txn.transition_to(ProducerState.INITIALIZING)
            bump = InitProducerId(txn.producer_id, txn.producer_epoch, self.result)
            txn.enqueue(bump)
        else:
            txn.complete_transaction(self.result)


def _unanswered(partitions: Collection[tuple[str, int]]) -> dict[Any, int]:
    """Per-partition codes before the answer is read: a partition it leaves out failed."""
    return dict.fromkeys(partitions, int(ErrorCode.UNKNOWN_SERVER_ERROR))


REQUEST_TYPES: Final[Mapping[TxnRequestKind, type[AnyTxnRequest]]] = MappingProxyType(
    {
        cls.KIND: cls
        for cls in (
            FindCoordinator,
            InitProducerId,
            AddPartitionsToTxn,
            AddOffsetsToTxn,
            TxnOffsetCommit,
            EndTxn,
        )
    }
)
