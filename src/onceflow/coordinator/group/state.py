"""The classic consumer group state machine: every state and every legal transition.

Everything that decides whether a group may move between states lives in this file, as a
literal table (Kafka's `GroupMetadata` / `ClassicGroupState`). `check_transition` raises
`IllegalGroupStateTransition` for a move the table does not allow; the coordinator treats that
as a bug, never as a client error.

| state                | may be entered from                                        |
| -------------------- | ---------------------------------------------------------- |
| EMPTY                | PREPARING_REBALANCE (the last member left or timed out)     |
| PREPARING_REBALANCE  | STABLE, COMPLETING_REBALANCE, EMPTY                        |
| COMPLETING_REBALANCE | PREPARING_REBALANCE (every member joined or the timeout)   |
| STABLE               | COMPLETING_REBALANCE (the leader's assignment is stored)   |
| DEAD                 | STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY,  |
|                      | DEAD (deleted, expired, or unloaded)                       |

A group is created EMPTY.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final

__all__ = [
    "VALID_PREVIOUS",
    "GroupState",
    "IllegalGroupStateTransition",
    "can_transition",
    "check_transition",
]


class GroupState(Enum):
    """State of a classic group; the value is the name Kafka reports in Describe/ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def from_name(cls, name: str) -> GroupState | None:
        """The state Kafka calls `name` (case-insensitive, as ListGroups filters), or None."""
        for state in cls:
            if state.value.lower() == name.lower():
                return state
        return None


VALID_PREVIOUS: Final[Mapping[GroupState, frozenset[GroupState]]] = MappingProxyType(
    {
        GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
        GroupState.PREPARING_REBALANCE: frozenset(
            {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
        ),
        GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
        GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
        GroupState.DEAD: frozenset(
            {
                GroupState.STABLE,
                GroupState.PREPARING_REBALANCE,
                GroupState.COMPLETING_REBALANCE,
                GroupState.EMPTY,
                GroupState.DEAD,
            }
        ),
    }
)


class IllegalGroupStateTransition(RuntimeError):
    """A group was asked to move between states the table does not connect (a bug)."""

    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        super().__init__(
            f"group {group_id!r}: illegal transition {current.value} -> {target.value}"
        )
        self.group_id = group_id
        self.current = current
        self.target = target


def can_transition(current: GroupState, target: GroupState) -> bool:
    """True when the table allows `current -> target`."""
    return current in VALID_PREVIOUS[target]


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raise `IllegalGroupStateTransition` unless the table allows `current -> target`."""
    if not can_transition(current, target):
        raise IllegalGroupStateTransition(group_id, current, target)
