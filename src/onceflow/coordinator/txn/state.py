"""Broker-side transaction states and the table of legal transitions (Kafka's `TransactionState`).

Everything that decides whether a transaction may move from one state to another lives in this
file, as a literal table: `VALID_PREVIOUS[target]` is the set of states `target` may be entered
from. `check_transition` raises `IllegalTxnTransition` for anything else. The enum values are
the ids persisted in `__transaction_state` (`TransactionLogValue.transaction_status`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import Final

__all__ = [
    "TV2_EXTRA_PREVIOUS",
    "VALID_PREVIOUS",
    "IllegalTxnTransition",
    "TxnState",
    "check_transition",
]


class TxnState(IntEnum):
    """A transactional id's state; the value is persisted in `__transaction_state`."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name for the state, as DescribeTransactions/ListTransactions report it."""
        return _KAFKA_NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        """The state called `name` by Kafka ("Ongoing", "PrepareCommit", ...), None if unknown."""
        return _BY_KAFKA_NAME.get(name)


_KAFKA_NAMES: Final = MappingProxyType(
    {
        TxnState.EMPTY: "Empty",
        TxnState.ONGOING: "Ongoing",
        TxnState.PREPARE_COMMIT: "PrepareCommit",
        TxnState.PREPARE_ABORT: "PrepareAbort",
        TxnState.COMPLETE_COMMIT: "CompleteCommit",
        TxnState.COMPLETE_ABORT: "CompleteAbort",
        TxnState.DEAD: "Dead",
        TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
    }
)
_BY_KAFKA_NAME: Final = MappingProxyType({name: state for state, name in _KAFKA_NAMES.items()})

_COMPLETED: Final = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})

VALID_PREVIOUS: Final[Mapping[TxnState, frozenset[TxnState]]] = MappingProxyType(
    {
        TxnState.EMPTY: _COMPLETED,
        TxnState.ONGOING: frozenset({TxnState.ONGOING}) | _COMPLETED,
        TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
        TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
        TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
        TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
        TxnState.DEAD: _COMPLETED,
        TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
    }
)

# KIP-890 "transaction version 2": a client may abort when no transaction is open (the
# coordinator then bumps the epoch). onceflow does not advertise transaction version 2 yet; the
# table is here so the rule lives with the others.
TV2_EXTRA_PREVIOUS: Final[Mapping[TxnState, frozenset[TxnState]]] = MappingProxyType(
    {TxnState.PREPARE_ABORT: _COMPLETED}
)


class IllegalTxnTransition(Exception):
    """A transition the table does not allow was attempted: a coordinator bug, never input."""

    def __init__(self, transactional_id: str, current: TxnState, target: TxnState, why: str = ""):
        self.transactional_id = transactional_id
        self.current = current
        self.target = target
        detail = f": {why}" if why else ""
        super().__init__(
            f"transactional id {transactional_id!r}: illegal transition "
            f"{current.name} -> {target.name}{detail}"
        )


def check_transition(
    transactional_id: str, current: TxnState, target: TxnState, *, tv2: bool = False
) -> None:
    """Raise `IllegalTxnTransition` unless `target` may be entered from `current`."""
    allowed = VALID_PREVIOUS[target]
    if tv2:
        allowed = allowed | TV2_EXTRA_PREVIOUS.get(target, frozenset())
    if current not in allowed:
        raise IllegalTxnTransition(transactional_id, current, target)
