"""Coordinator decision rules, table-driven over every (TxnState, request, epoch) combination.

Each case seeds a transactional id in a state (producer id 1000, epoch 5) on a coordinator over
a real LogManager, sends one request and checks the error code, then - once any marker writing
finished - the state and epoch. DEAD and PREPARE_EPOCH_FENCE are never the settled state of a
cached id: reaching the state logic with them is a coordinator bug and raises.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from coordinator.txn.txn_helpers import TP0, TP1, coordinator_env
from onceflow.common import TopicPartition
from onceflow.coordinator.txn.metadata import TransactionMetadata
from onceflow.coordinator.txn.state import IllegalTxnTransition, TxnState
from onceflow.protocol.errors import ErrorCode

S = TxnState
E = ErrorCode
PID, EPOCH = 1000, 5
RAISES = "raises"
OPEN = {S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE}
SETTLED = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
BUGS = (S.DEAD, S.PREPARE_EPOCH_FENCE)

# request -> epoch variant -> state -> (error, state afterwards, epoch afterwards) or RAISES
# epoch variants: "current" (5), "stale" (3), "newer" (6), "other_pid" (producer id 999)


def _same(state):
    return {s: (e, s, EPOCH) for s, e in state.items()}


def _init(expected_error_settled):
    table = {s: expected_error_settled for s in SETTLED}
    table[S.ONGOING] = (E.CONCURRENT_TRANSACTIONS, S.COMPLETE_ABORT, EPOCH + 1)  # fence + abort
    table[S.PREPARE_COMMIT] = (E.CONCURRENT_TRANSACTIONS, S.PREPARE_COMMIT, EPOCH)
    table[S.PREPARE_ABORT] = (E.CONCURRENT_TRANSACTIONS, S.PREPARE_ABORT, EPOCH)
    table.update(dict.fromkeys(BUGS, RAISES))
    return table


_BUMP = (E.NONE, S.EMPTY, EPOCH + 1)
_FENCED = {s: (E.PRODUCER_FENCED, s, EPOCH) for s in TxnState}


def _add():
    table = {s: (E.NONE, S.ONGOING, EPOCH) for s in (*SETTLED, S.ONGOING)}
    table[S.PREPARE_COMMIT] = (E.CONCURRENT_TRANSACTIONS, S.PREPARE_COMMIT, EPOCH)
    table[S.PREPARE_ABORT] = (E.CONCURRENT_TRANSACTIONS, S.PREPARE_ABORT, EPOCH)
    table.update(dict.fromkeys(BUGS, RAISES))
    return table


def _end(commit: bool):
    done_same = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
    done_other = S.COMPLETE_ABORT if commit else S.COMPLETE_COMMIT
    prep_same = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    prep_other = S.PREPARE_ABORT if commit else S.PREPARE_COMMIT
    table = {
        S.ONGOING: (E.NONE, done_same, EPOCH),
        S.EMPTY: (E.INVALID_TXN_STATE, S.EMPTY, EPOCH),
        done_same: (E.NONE, done_same, EPOCH),  # an idempotent retry
        done_other: (E.INVALID_TXN_STATE, done_other, EPOCH),
        prep_same: (E.CONCURRENT_TRANSACTIONS, prep_same, EPOCH),
        prep_other: (E.INVALID_TXN_STATE, prep_other, EPOCH),
    }
    table.update(dict.fromkeys(BUGS, RAISES))
    return table


_MAPPING = {s: (E.INVALID_PRODUCER_ID_MAPPING, s, EPOCH) for s in TxnState}

EXPECTED = {
    "init_no_expected": {"current": _init(_BUMP)},
    "init_kip360": {
        "current": _init(_BUMP),
        "stale": _init((E.PRODUCER_FENCED, None, EPOCH)),
        "newer": _init((E.PRODUCER_FENCED, None, EPOCH)),
        "other_pid": _FENCED,
    },
    "add_partitions": {
        "current": _add(),
        "stale": _FENCED,
        "newer": _FENCED,
        "other_pid": _MAPPING,
    },
    "add_offsets": {"current": _add(), "stale": _FENCED, "newer": _FENCED, "other_pid": _MAPPING},
    "end_commit": {
        "current": _end(True),
        "stale": _FENCED,
        "newer": _FENCED,
        "other_pid": _MAPPING,
    },
    "end_abort": {
        "current": _end(False),
        "stale": _FENCED,
        "newer": _FENCED,
        "other_pid": _MAPPING,
    },
}
_PRODUCER = {"current": (PID, EPOCH), "stale": (PID, 3), "newer": (PID, 6), "other_pid": (999, 5)}

CASES = [
    (request, variant, state)
    for request, variants in EXPECTED.items()
    for variant, table in variants.items()
    for state in TxnState
]


def test_every_state_is_covered() -> None:
    for variants in EXPECTED.values():
        for table in variants.values():
            assert set(table) == set(TxnState)


def seed(coordinator, state: TxnState) -> None:
    parts = [TP0] if state in OPEN else []
    coordinator.put_transaction_state(
        TransactionMetadata(
            "tx",
            PID,
            producer_epoch=EPOCH,
            txn_timeout_ms=60_000,
            state=state,
            topic_partitions=parts,
            txn_start_timestamp=coordinator.clock() - 10 if parts else -1,
            txn_last_update_timestamp=coordinator.clock() - 10,
        )
    )


async def send(coordinator, request: str, variant: str):
    pid, epoch = _PRODUCER[variant]
    if request == "init_no_expected":
        return (await coordinator.handle_init_producer_id("tx", 30_000)).error
    if request == "init_kip360":
        return (await coordinator.handle_init_producer_id("tx", 30_000, (pid, epoch))).error
    if request == "add_partitions":
        result = await coordinator.handle_add_partitions("tx", pid, epoch, [TP1])
        assert len(set(result.values())) == 1
        return result[TP1]
    if request == "add_offsets":
        return await coordinator.handle_add_offsets("tx", pid, epoch, "group")
    return await coordinator.handle_end_txn("tx", pid, epoch, request == "end_commit")


@pytest.mark.parametrize(("request_name", "variant", "state"), CASES)
def test_rule(tmp_path, request_name: str, variant: str, state: TxnState) -> None:
    expected = EXPECTED[request_name][variant][state]

    async def main():
        topics = {"t": 2, "__consumer_offsets": 2}
        async with coordinator_env(str(tmp_path), topics=topics) as coordinator:
            seed(coordinator, state)
            if expected == RAISES:
                with pytest.raises(IllegalTxnTransition):
                    await send(coordinator, request_name, variant)
                return
            error = await send(coordinator, request_name, variant)
            await coordinator.wait_for_completions()
            md = coordinator.get("tx")
            want_error, want_state, want_epoch = expected
            assert error == want_error
            assert md.state is (state if want_state is None else want_state)
            assert md.producer_epoch == want_epoch
            assert md.pending_state is None
            if request_name == "add_partitions" and error == E.NONE:
                assert TP1 in md.topic_partitions
            if request_name == "add_offsets" and error == E.NONE:
                assert any(tp.topic == "__consumer_offsets" for tp in md.topic_partitions)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("request_name", "state"),
    list(
        itertools.product(
            ["init_kip360", "add_partitions", "end_commit", "end_abort"], SETTLED + (S.ONGOING,)
        )
    ),
)
def test_pending_transition_answers_concurrent(tmp_path, request_name, state) -> None:
    """While a transition is pending, competing requests get CONCURRENT_TRANSACTIONS."""

    async def main():
        async with coordinator_env(str(tmp_path)) as coordinator:
            seed(coordinator, state)
            md = coordinator.get("tx")
            md.prepare_add_partitions([TopicPartition("t", 1)], coordinator.clock())
            error = await send(coordinator, request_name, "current")
            assert error == E.CONCURRENT_TRANSACTIONS
            assert md.pending_state is S.ONGOING and md.state is state

    asyncio.run(main())
