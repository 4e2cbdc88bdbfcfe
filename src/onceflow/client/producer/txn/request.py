"""One transactional coordinator request, in general: the base of the request classes in
`requests` (Kafka's `TxnRequestHandler`), with no I/O.

`TxnRequest` is a queued request: its kind (`TxnRequestKind`, whose value gives its priority),
the `TransactionalRequestResult` an application thread waits on, when it may be retried, and
the hooks each kind fills in: `build` and `parse` (the exchange), `ERRORS` (its error table,
error code -> `TxnAction`), `on_success`, `on_retry`, `on_failure` and `error_for`. `decide`
picks the worst action of an answer's codes; a code not in the kind's table is FATAL, as
Kafka's handlers fail on an "unexpected error". `TransactionContext` names what a request may
read and change of the producer's transaction (the `TxnManager`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import Any, ClassVar, Final, Generic, Protocol, TypeVar

from onceflow.client.errors import (
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    error_for_code,
)
from onceflow.client.net.coordinator_lookup import TRANSACTION
from onceflow.client.producer.states import ProducerState
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.message import Message, Request

__all__ = [
    "ErrorCodes",
    "TransactionContext",
    "TransactionalRequestResult",
    "TxnAction",
    "AnyTxnRequest",
    "TxnRequest",
    "TxnRequestKind",
    "error_table",
]


class TxnRequestKind(IntEnum):
    """A coordinator request; the value orders kinds of the same priority."""

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


# how bad an action is, to pick one from per-partition answers
_SEVERITY: Final[Mapping[TxnAction, int]] = MappingProxyType(
    {
        TxnAction.COMPLETE: 0,
        TxnAction.RETRY: 1,
        TxnAction.LOOKUP: 2,
        TxnAction.ABORTABLE: 3,
        TxnAction.FATAL: 4,
        TxnAction.FENCED: 5,
    }
)


def error_table(*parts: Mapping[ErrorCode, TxnAction]) -> Mapping[ErrorCode, TxnAction]:
    """An error table from its parts (later parts win); NONE is COMPLETE."""
    merged: dict[ErrorCode, TxnAction] = {ErrorCode.NONE: TxnAction.COMPLETE}
    for part in parts:
        merged.update(part)
    return MappingProxyType(merged)


class TransactionContext(Protocol):
    """What a request reads and changes of the producer's transaction (`TxnManager`)."""

    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    epoch_bump_required: bool
    transaction_started: bool
    coordinators: dict[tuple[int, str], tuple[int, str, int]]
    partitions_in_transaction: set[tuple[str, int]]
    pending_partitions: set[tuple[str, int]]

    def transition_to(self, target: ProducerState) -> None: ...
    def reset_sequences(self) -> None: ...
    def clear_transaction(self) -> None: ...
    def complete_transaction(self, result: TransactionalRequestResult) -> None: ...
    def enqueue(self, request: AnyTxnRequest) -> None: ...


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
ErrorCodes = Mapping[Any, int]  # None -> code, or (topic, partition) -> code


_R = TypeVar("_R", bound=Message)


class TxnRequest(Generic[_R]):
    """One queued coordinator request (the base of one class per kind), typed by the class
    of its answer."""

    KIND: ClassVar[TxnRequestKind]
    API_KEY: ClassVar[ApiKey]
    MAX_VERSION: ClassVar[int | None] = None  # None: the highest both sides support
    ERRORS: ClassVar[Mapping[ErrorCode, TxnAction]]

    def __init__(self, result: TransactionalRequestResult | None = None):
        self.result = result or TransactionalRequestResult(self.KIND.name)
        self.retry_at = 0.0
        self.attempts = 0
        self.order = next(_sequence)

    @property
    def kind(self) -> TxnRequestKind:
        return self.KIND

    def sort_key(self) -> tuple[int, int]:
        return (self.KIND.priority, self.order)

    # ------------------------------------------------------------------ where it goes

    def coordinator_key(self, txn: TransactionContext) -> tuple[int, str]:
        """The coordinator this request is about: (key type, key)."""
        return (TRANSACTION, txn.transactional_id)

    def target(self, txn: TransactionContext) -> tuple[int, str] | None:
        """The coordinator to send to, None for any broker."""
        return self.coordinator_key(txn)

    # ------------------------------------------------------------------ the exchange

    def build(self, txn: TransactionContext, version: int) -> Request[_R]:
        raise NotImplementedError

    def parse(self, response: _R, version: int) -> tuple[ErrorCodes, dict[str, Any]]:
        """The answer's error codes and data."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the answer

    @classmethod
    def action(cls, error_code: int) -> TxnAction:
        """The action for `error_code` in an answer to this kind (unknown: FATAL)."""
        try:
            code = ErrorCode(error_code)
        except ValueError:
            return TxnAction.FATAL
        return cls.ERRORS.get(code, TxnAction.FATAL)

    def decide(self, error_codes: ErrorCodes) -> tuple[TxnAction, int]:
        """The worst action among the answer's codes, and its code."""
        worst, worst_code = TxnAction.COMPLETE, int(ErrorCode.NONE)
        for code in error_codes.values():
            action = self.action(code)
            if _SEVERITY[action] > _SEVERITY[worst]:
                worst, worst_code = action, code
        return worst, worst_code

    def on_success(self, txn: TransactionContext, fields: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def on_retry(self, error_codes: ErrorCodes) -> None:
        """The request goes out again (after RETRY or LOOKUP)."""

    def on_failure(self, txn: TransactionContext) -> None:
        """The request failed (ABORTABLE, FENCED or FATAL)."""

    def error_for(self, action: TxnAction, code: int, txn: TransactionContext) -> KafkaError:
        """The error a failed request completes with."""
        if action is TxnAction.FENCED:
            return ProducerFencedError(
                "There is a newer producer with the same transactionalId which fences the "
                f"current one ({ErrorCode(code).name} on {self.KIND.name})"
            )
        return error_for_code(code, f"{self.KIND.name} for transactional id {txn.transactional_id}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} attempts={self.attempts}>"


AnyTxnRequest = TxnRequest[Any]  # a queued request of any kind (answers of different classes)
