"""The producer's transaction-manager states and their transition table.

Everything that decides which state may follow which lives here, as a literal table (the
states and valid previous states of Kafka's client `TransactionManager`). The idempotent
producer uses UNINITIALIZED -> INITIALIZING -> READY, READY -> UNINITIALIZED for an epoch bump,
and FATAL_ERROR; a transactional producer (`txn_manager.TxnManager`) also goes through
IN_TRANSACTION, COMMITTING_TRANSACTION, ABORTING_TRANSACTION and ABORTABLE_ERROR. An illegal
transition raises `InvalidStateTransitionError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final

from onceflow.client.errors import IllegalStateError

__all__ = ["VALID_PREVIOUS", "InvalidStateTransitionError", "ProducerState", "check_transition"]


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
        _S.UNINITIALIZED: frozenset({_S.READY, _S.ABORTABLE_ERROR}),
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


class InvalidStateTransitionError(IllegalStateError):
    """A transition the table does not allow (a client bug, never a broker answer)."""

    def __init__(self, source: ProducerState, target: ProducerState):
        self.source, self.target = source, target
        super().__init__(f"Invalid transition attempted from state {source.name} to {target.name}")


def check_transition(source: ProducerState, target: ProducerState) -> None:
    """Raise `InvalidStateTransitionError` unless `source -> target` is in the table."""
    if source not in VALID_PREVIOUS[target]:
        raise InvalidStateTransitionError(source, target)
