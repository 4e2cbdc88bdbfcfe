"""The transition table: every (current, target) pair against REFERENCE.md's table."""

from __future__ import annotations

import itertools

import pytest

from onceflow.coordinator.txn.state import (
    VALID_PREVIOUS,
    IllegalTxnTransition,
    TxnState,
    check_transition,
)

S = TxnState
# REFERENCE.md, written out independently of state.py
EXPECTED = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_persisted_ids() -> None:
    assert [(s.name, int(s)) for s in TxnState] == [
        ("EMPTY", 0),
        ("ONGOING", 1),
        ("PREPARE_COMMIT", 2),
        ("PREPARE_ABORT", 3),
        ("COMPLETE_COMMIT", 4),
        ("COMPLETE_ABORT", 5),
        ("DEAD", 6),
        ("PREPARE_EPOCH_FENCE", 7),
    ]


def test_table_matches_reference() -> None:
    assert {k: set(v) for k, v in VALID_PREVIOUS.items()} == EXPECTED


@pytest.mark.parametrize(("current", "target"), list(itertools.product(TxnState, TxnState)))
def test_every_pair(current: TxnState, target: TxnState) -> None:
    if current in EXPECTED[target]:
        check_transition("tx", current, target)
    else:
        with pytest.raises(IllegalTxnTransition) as info:
            check_transition("tx", current, target)
        assert (info.value.current, info.value.target) == (current, target)


@pytest.mark.parametrize("current", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_transaction_version_2_abort_from_completed(current: TxnState) -> None:
    with pytest.raises(IllegalTxnTransition):
        check_transition("tx", current, S.PREPARE_ABORT)
    check_transition("tx", current, S.PREPARE_ABORT, tv2=True)


def test_kafka_names_round_trip() -> None:
    assert S.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"
    for state in TxnState:
        assert TxnState.from_kafka_name(state.kafka_name) is state
    assert TxnState.from_kafka_name("Bogus") is None
