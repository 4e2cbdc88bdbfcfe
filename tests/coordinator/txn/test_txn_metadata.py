"""TransactionMetadata: the two-phase prepare/complete API and its invariants."""

from __future__ import annotations

import pytest

from onceflow.common import TopicPartition
from onceflow.coordinator.txn.metadata import MAX_PRODUCER_EPOCH, TransactionMetadata
from onceflow.coordinator.txn.state import IllegalTxnTransition, TxnState
from onceflow.protocol.errors import ErrorCode

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def md(state=TxnState.EMPTY, epoch=3, parts=(), last_epoch=-1) -> TransactionMetadata:
    return TransactionMetadata(
        "tx",
        7,
        producer_epoch=epoch,
        last_producer_epoch=last_epoch,
        txn_timeout_ms=1000,
        state=state,
        topic_partitions=parts,
        txn_start_timestamp=100 if parts else -1,
        txn_last_update_timestamp=100,
    )


def test_prepare_sets_pending_and_complete_applies() -> None:
    m = md()
    transit = m.prepare_add_partitions([TP0], now_ms=200)
    assert m.pending_state is TxnState.ONGOING and m.state is TxnState.EMPTY
    assert m.topic_partitions == set()  # nothing changes before completion
    with pytest.raises(IllegalTxnTransition, match="already pending"):
        m.prepare_add_partitions([TP1], now_ms=201)
    m.complete_transition(transit)
    assert (m.state, m.pending_state, m.topic_partitions) == (TxnState.ONGOING, None, {TP0})
    assert (m.txn_start_timestamp, m.txn_last_update_timestamp) == (200, 200)


def test_transit_is_immutable() -> None:
    transit = md().prepare_add_partitions([TP0], now_ms=200)
    with pytest.raises(AttributeError):
        transit.producer_epoch = 9  # type: ignore[misc]


def test_cancel_keeps_state() -> None:
    m = md()
    m.prepare_add_partitions([TP0], now_ms=200)
    m.cancel_transition()
    assert (m.state, m.pending_state) == (TxnState.EMPTY, None)


def test_complete_requires_the_pending_transit() -> None:
    m = md(TxnState.ONGOING, parts=[TP0])
    other = md(TxnState.ONGOING, parts=[TP0]).prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 5)
    with pytest.raises(IllegalTxnTransition, match="pending state is None"):
        m.complete_transition(other)


def test_add_partitions_keeps_start_of_ongoing() -> None:
    m = md(TxnState.ONGOING, parts=[TP0])
    transit = m.prepare_add_partitions([TP1], now_ms=500)
    assert transit.txn_start_timestamp == 100 and transit.topic_partitions == {TP0, TP1}


@pytest.mark.parametrize(
    ("expected", "result"),
    [
        (None, (ErrorCode.NONE, 4, -1)),  # fresh init: bump, forget the last epoch
        (3, (ErrorCode.NONE, 4, 3)),  # KIP-360 bump from the current epoch
        (2, (ErrorCode.NONE, 3, 2)),  # retry of a bump that lost its answer: no second bump
        (1, (ErrorCode.PRODUCER_FENCED, None, None)),
        (4, (ErrorCode.PRODUCER_FENCED, None, None)),
    ],
)
def test_incr_producer_epoch(expected, result) -> None:
    m = md(TxnState.COMPLETE_COMMIT, epoch=3, last_epoch=2)
    error, transit = m.prepare_incr_producer_epoch(2000, expected, now_ms=300)
    got = (error, transit and transit.producer_epoch, transit and transit.last_producer_epoch)
    assert got == result
    if transit is not None:
        assert transit.txn_state is TxnState.EMPTY and transit.txn_timeout_ms == 2000
    else:
        assert m.pending_state is None


def test_rotation_keeps_previous_id() -> None:
    m = md(TxnState.COMPLETE_ABORT, epoch=MAX_PRODUCER_EPOCH - 1)
    assert m.is_producer_epoch_exhausted
    transit = m.prepare_producer_id_rotation(99, 1000, 300, record_last_epoch=True)
    m.complete_transition(transit)
    assert (m.producer_id, m.producer_epoch, m.previous_producer_id, m.last_producer_epoch) == (
        99,
        0,
        7,
        MAX_PRODUCER_EPOCH - 1,
    )


def test_epoch_fence_then_abort() -> None:
    m = md(TxnState.ONGOING, parts=[TP0])
    fence = m.prepare_fence_producer_epoch()
    assert (fence.txn_state, fence.producer_epoch, m.pending_state) == (
        TxnState.PREPARE_EPOCH_FENCE,
        4,
        TxnState.PREPARE_EPOCH_FENCE,
    )
    with pytest.raises(IllegalTxnTransition):
        m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 400, fence)
    prepare = m.prepare_abort_or_commit(TxnState.PREPARE_ABORT, 400, fence)
    assert (prepare.producer_epoch, m.producer_epoch) == (4, 4)
    # the append failed: the next fence does not bump again
    m.cancel_transition()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 4


def test_complete_after_prepare_clears_partitions() -> None:
    m = md(TxnState.ONGOING, parts=[TP0, TP1])
    m.complete_transition(m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 400))
    done = m.prepare_complete(500)
    assert done.txn_state is TxnState.COMPLETE_COMMIT and not done.topic_partitions
    m.complete_transition(done)
    assert m.state is TxnState.COMPLETE_COMMIT and not m.topic_partitions


@pytest.mark.parametrize("state", [TxnState.ONGOING, TxnState.PREPARE_COMMIT])
def test_dead_only_from_completed(state) -> None:
    with pytest.raises(IllegalTxnTransition):
        md(state, parts=[TP0]).prepare_dead()


def test_epoch_may_not_go_back() -> None:
    m = md(TxnState.EMPTY, epoch=5, last_epoch=4)
    # a KIP-360 retry returning the current epoch is fine
    error, transit = m.prepare_incr_producer_epoch(1000, 4, 1)
    assert error == ErrorCode.NONE and transit.producer_epoch == 5
    m.complete_transition(transit)
    m.producer_epoch = 6  # simulate a newer epoch applied meanwhile
    m.pending_state = TxnState.EMPTY
    with pytest.raises(IllegalTxnTransition, match="epoch would go back"):
        m.complete_transition(transit)
