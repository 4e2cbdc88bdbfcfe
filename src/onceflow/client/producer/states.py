"""The producer's transaction-manager states and every table about them.

Everything that affects the client's transaction state machine lives here, as literal tables:
the states and valid previous states of Kafka's client `TransactionManager` (`VALID_PREVIOUS`),
the application calls allowed in each state (`ALLOWED_STATES`), the calls that resume one that
timed out (`RESUMES_IN`), and the named sets of states the manager and the sender test against.
What each coordinator answer does is in the error table of its request class
(`requests`); those tables name actions, the manager turns them into transitions here.

The idempotent producer uses UNINITIALIZED -> INITIALIZING -> READY, READY -> UNINITIALIZED
for an epoch bump, and FATAL_ERROR; a transactional producer (`manager.TxnManager`) also
goes through IN_TRANSACTION, COMMITTING_TRANSACTION, ABORTING_TRANSACTION and ABORTABLE_ERROR.
IN_TRANSACTION -> UNINITIALIZED is a transaction handed over, flushed, to another producer
instance that ends it (`resume_transaction` there); the next `init_transactions` fences it.
An illegal transition raises `InvalidStateTransitionError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final

from onceflow.client.errors import IllegalStateError

__all__ = [
    "ABORTABLE_IGNORED_IN",
    "ALLOWED_STATES",
    "BATCH_FAILURE_ABORTS_IN",
    "COMPLETING",
    "DROPS_BATCHES_IN",
    "ERROR_STATES",
    "HAS_PRODUCER_ID_IN",
    "RESUMES_IN",
    "SENDS_BATCHES_IN",
    "VALID_PREVIOUS",
    "InvalidStateTransitionError",
    "ProducerState",
    "TxnApi",
    "check_transition",
]


class ProducerState(Enum):
    """Kafka's client-side `TransactionManager.State`."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_S = ProducerState

# target state -> the states it may be entered from (FATAL_ERROR: from any state)
VALID_PREVIOUS: Final[Mapping[ProducerState, frozenset[ProducerState]]] = MappingProxyType(
    {
        # IN_TRANSACTION: the open transaction was handed over to another instance to end
        # (TxnManager.hand_over_transaction, two-phase commit)
        _S.UNINITIALIZED: frozenset({_S.READY, _S.ABORTABLE_ERROR, _S.IN_TRANSACTION}),
        _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING_TRANSACTION}),
        _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
        _S.IN_TRANSACTION: frozenset({_S.READY}),
        _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
        _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
        _S.ABORTABLE_ERROR: frozenset(
            {_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR, _S.INITIALIZING}
        ),
        _S.FATAL_ERROR: frozenset(ProducerState),
    }
)


class TxnApi(Enum):
    """The producer's transactional calls."""

    INIT_TRANSACTIONS = "init_transactions"
    BEGIN_TRANSACTION = "begin_transaction"
    SEND = "send"
    SEND_OFFSETS_TO_TRANSACTION = "send_offsets_to_transaction"
    COMMIT_TRANSACTION = "commit_transaction"
    ABORT_TRANSACTION = "abort_transaction"


# call -> the states it may be made in (FATAL_ERROR: never; ABORTABLE_ERROR: abort only)
ALLOWED_STATES: Final[Mapping[TxnApi, frozenset[ProducerState]]] = MappingProxyType(
    {
        TxnApi.INIT_TRANSACTIONS: frozenset({_S.UNINITIALIZED}),
        TxnApi.BEGIN_TRANSACTION: frozenset({_S.READY}),
        TxnApi.SEND: frozenset({_S.IN_TRANSACTION}),
        TxnApi.SEND_OFFSETS_TO_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
        TxnApi.COMMIT_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
        TxnApi.ABORT_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    }
)

# a call whose earlier attempt timed out resumes waiting while the state is still this one
RESUMES_IN: Final[Mapping[TxnApi, ProducerState]] = MappingProxyType(
    {
        TxnApi.INIT_TRANSACTIONS: _S.INITIALIZING,
        TxnApi.COMMIT_TRANSACTION: _S.COMMITTING_TRANSACTION,
        TxnApi.ABORT_TRANSACTION: _S.ABORTING_TRANSACTION,
    }
)

# a transactional producer has a usable producer id and epoch
HAS_PRODUCER_ID_IN: Final = frozenset(
    {_S.READY, _S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}
)
# batches, and AddPartitionsToTxn for their partitions, go out
SENDS_BATCHES_IN: Final = frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION})
# the transaction is ending (EndTxn is queued or in flight)
COMPLETING: Final = frozenset({_S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION})
# queued batches are failed: the transaction is being or must be aborted
DROPS_BATCHES_IN: Final = frozenset({_S.ABORTABLE_ERROR, _S.ABORTING_TRANSACTION})
# a failed batch makes the transaction abortable
BATCH_FAILURE_ABORTS_IN: Final = frozenset(
    {_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR}
)
# an abortable error changes nothing (the abort is under way, or the producer failed)
ABORTABLE_IGNORED_IN: Final = frozenset({_S.ABORTING_TRANSACTION, _S.FATAL_ERROR})
# queued coordinator requests fail with the producer's error (FindCoordinator still goes out
# in ABORTABLE_ERROR, for the abort that must follow)
ERROR_STATES: Final = frozenset({_S.ABORTABLE_ERROR, _S.FATAL_ERROR})


class InvalidStateTransitionError(IllegalStateError):
    """A transition the table does not allow (a client bug, never a broker answer)."""

    def __init__(self, source: ProducerState, target: ProducerState):
        self.source, self.target = source, target
        super().__init__(f"Invalid transition attempted from state {source.name} to {target.name}")


def check_transition(source: ProducerState, target: ProducerState) -> None:
    """Raise `InvalidStateTransitionError` unless `source -> target` is in the table."""
    if source not in VALID_PREVIOUS[target]:
        raise InvalidStateTransitionError(source, target)
