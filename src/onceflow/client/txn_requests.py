"""The transactional producer's coordinator requests, as data (no I/O).

`TxnRequest` is one queued request to a coordinator (Kafka's `TxnRequestHandler`): its kind,
what it carries, and the `TransactionalRequestResult` an application thread waits on. Requests
go out one at a time in priority order (Kafka's `TransactionManager.Priority`):
FindCoordinator < InitProducerId < AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit <
EndTxn, then in the order they were queued.

`ERROR_ACTIONS[kind]` maps each answer's error code to a `TxnAction`, a table per request
kind after Kafka's response handlers; a code not listed takes `DEFAULT_ACTIONS[kind]`.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import Any, Final

from onceflow.client.errors import KafkaTimeoutError
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "DEFAULT_ACTIONS",
    "END_TXN_TV1_MAX",
    "ERROR_ACTIONS",
    "GROUP",
    "PRODUCE_TV1_MAX",
    "TRANSACTION",
    "TXN_OFFSET_COMMIT_TV1_MAX",
    "TransactionalRequestResult",
    "TxnAction",
    "TxnRequest",
    "TxnRequestKind",
    "action_for",
]

GROUP = 0  # FindCoordinator key types
TRANSACTION = 1

# The client speaks transaction version 1 (KIP-890 part 1: the epoch is bumped only on
# recovery), so, as the message specs require, it never uses the versions that mean
# version 2 (the broker then adds partitions and offsets implicitly): within a transaction
# Produce stays <= v11, TxnOffsetCommit <= v4 and EndTxn <= v4.
PRODUCE_TV1_MAX: Final = 11
TXN_OFFSET_COMMIT_TV1_MAX: Final = 4
END_TXN_TV1_MAX: Final = 4


class TxnRequestKind(IntEnum):
    """A coordinator request; the value is its priority (lower goes first)."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_TO_TXN = 2
    ADD_OFFSETS_TO_TXN = 3
    TXN_OFFSET_COMMIT = 4
    END_TXN = 5

    @property
    def priority(self) -> int:
        """Kafka's priority classes: AddPartitions, AddOffsets and TxnOffsetCommit share one."""
        return {0: 0, 1: 1, 2: 2, 3: 2, 4: 2, 5: 3}[int(self)]


class TxnAction(Enum):
    """What an answer's error code means for the request and the producer."""

    COMPLETE = "complete"  # done
    RETRY = "retry"  # queue again after retry.backoff.ms
    LOOKUP = "lookup"  # find the coordinator again, then retry
    ABORTABLE = "abortable"  # the transaction must be aborted (ABORTABLE_ERROR)
    FENCED = "fenced"  # another producer took over the transactional id (FATAL_ERROR)
    FATAL = "fatal"  # the producer cannot continue (FATAL_ERROR)


_K = TxnRequestKind
_A = TxnAction
_E = ErrorCode

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


def _table(*parts: Mapping[ErrorCode, TxnAction]) -> Mapping[ErrorCode, TxnAction]:
    merged: dict[ErrorCode, TxnAction] = {_E.NONE: _A.COMPLETE}
    for part in parts:
        merged.update(part)
    return MappingProxyType(merged)


# request kind -> error code -> action (Kafka's FindCoordinatorHandler, InitProducerIdHandler,
# AddPartitionsToTxnHandler, AddOffsetsToTxnHandler, TxnOffsetCommitHandler, EndTxnHandler)
ERROR_ACTIONS: Final[Mapping[TxnRequestKind, Mapping[ErrorCode, TxnAction]]] = MappingProxyType(
    {
        _K.FIND_COORDINATOR: _table(
            {
                _E.COORDINATOR_NOT_AVAILABLE: _A.RETRY,
                _E.COORDINATOR_LOAD_IN_PROGRESS: _A.RETRY,
                _E.NOT_COORDINATOR: _A.RETRY,
                _E.REQUEST_TIMED_OUT: _A.RETRY,
                _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _A.FATAL,
                _E.GROUP_AUTHORIZATION_FAILED: _A.ABORTABLE,
            }
        ),
        _K.INIT_PRODUCER_ID: _table(
            _COORDINATOR_MOVED, _FATAL, {_E.CONCURRENT_TRANSACTIONS: _A.RETRY}
        ),
        _K.ADD_PARTITIONS_TO_TXN: _table(
            _COORDINATOR_MOVED,
            _FATAL,
            _LOST_PRODUCER_ID,
            {
                _E.CONCURRENT_TRANSACTIONS: _A.RETRY,
                _E.UNKNOWN_TOPIC_OR_PARTITION: _A.RETRY,
                _E.OPERATION_NOT_ATTEMPTED: _A.RETRY,
                _E.TOPIC_AUTHORIZATION_FAILED: _A.ABORTABLE,
            },
        ),
        _K.ADD_OFFSETS_TO_TXN: _table(
            _COORDINATOR_MOVED,
            _FATAL,
            _LOST_PRODUCER_ID,
            {_E.CONCURRENT_TRANSACTIONS: _A.RETRY, _E.GROUP_AUTHORIZATION_FAILED: _A.ABORTABLE},
        ),
        _K.TXN_OFFSET_COMMIT: _table(
            _COORDINATOR_MOVED,
            _FATAL,
            _LOST_PRODUCER_ID,
            {
                _E.CONCURRENT_TRANSACTIONS: _A.RETRY,
                _E.UNKNOWN_TOPIC_OR_PARTITION: _A.RETRY,
                _E.UNKNOWN_MEMBER_ID: _A.ABORTABLE,
                _E.ILLEGAL_GENERATION: _A.ABORTABLE,
                _E.FENCED_INSTANCE_ID: _A.ABORTABLE,
                _E.GROUP_AUTHORIZATION_FAILED: _A.ABORTABLE,
            },
        ),
        _K.END_TXN: _table(
            _COORDINATOR_MOVED, _FATAL, _LOST_PRODUCER_ID, {_E.CONCURRENT_TRANSACTIONS: _A.RETRY}
        ),
    }
)

# a code missing from a kind's table ("unexpected error" in Kafka's handlers)
DEFAULT_ACTIONS: Final[Mapping[TxnRequestKind, TxnAction]] = MappingProxyType(
    {kind: _A.FATAL for kind in TxnRequestKind}
)


def action_for(kind: TxnRequestKind, error_code: int) -> TxnAction:
    """The action for `error_code` in an answer to a `kind` request."""
    try:
        code = ErrorCode(error_code)
    except ValueError:
        return DEFAULT_ACTIONS[kind]
    return ERROR_ACTIONS[kind].get(code, DEFAULT_ACTIONS[kind])


class TransactionalRequestResult:
    """The outcome of a transactional call, completed by the I/O thread (Kafka's
    `TransactionalRequestResult`). `wait(timeout)` marks it acknowledged once it returns or
    raises the call's error; a wait that times out leaves it pending, so the same call can
    be made again to go on waiting (a commit that timed out is retried, not aborted)."""

    def __init__(self, operation: str):
        self.operation = operation
        self.error: BaseException | None = None
        self.acked = False
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def complete(self, error: BaseException | None = None) -> None:
        """Set the outcome (the first call wins)."""
        if not self._done.is_set():
            self.error = error
            self._done.set()

    def wait(self, timeout: float | None) -> None:
        """Block until done; raise the call's error, or `KafkaTimeoutError` after `timeout`."""
        if not self._done.wait(timeout):
            raise KafkaTimeoutError(
                f"Timeout expired after {timeout} s while awaiting {self.operation}"
            )
        self.acked = True
        if self.error is not None:
            raise self.error

    def __repr__(self) -> str:
        state = "pending" if not self.done else ("failed" if self.error else "done")
        return f"<TransactionalRequestResult {self.operation} {state}>"


_sequence = itertools.count()


class TxnRequest:
    """One queued coordinator request."""

    __slots__ = ("kind", "data", "result", "retry_at", "attempts", "order")

    def __init__(
        self,
        kind: TxnRequestKind,
        data: Any = None,
        result: TransactionalRequestResult | None = None,
    ):
        self.kind = kind
        self.data = data  # per kind: see TxnManager's enqueue_* methods
        self.result = result or TransactionalRequestResult(kind.name)
        self.retry_at = 0.0
        self.attempts = 0
        self.order = next(_sequence)

    def sort_key(self) -> tuple[int, int]:
        return (self.kind.priority, self.order)

    def __repr__(self) -> str:
        return f"<TxnRequest {self.kind.name} attempts={self.attempts}>"
