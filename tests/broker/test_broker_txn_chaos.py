"""Chaos for the transaction APIs, in-process: cancel every handler at every await point
(issue 8, defect 3).

For each of InitProducerId (new id, epoch bump, fencing an ONGOING transaction),
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn (commit, abort), the handler
runs through the wire codec as a connection would run it, and its task is cancelled at its
n-th suspension, for n = 1, 2, ... until it finishes first; so every await point of every
path is hit once, deterministically. After each cancellation the transactional id must end in
EMPTY or COMPLETE_* (an ONGOING transaction is aborted by the timeout check, as the broker's
timer does once `transaction.timeout.ms` has passed), with no transition pending, and the next
InitProducerId must succeed rather than answer CONCURRENT_TRANSACTIONS.

The wire-level half (connections killed at random under real clients) is
tests/faults/test_fault_txn_chaos.py.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.broker_helpers import call, create
from broker.test_broker_group_offsets import txn_commit_request
from broker.test_broker_txn_handlers import add_partitions, end_txn, find_txn, init, run
from onceflow.coordinator.txn.state import TxnState
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from onceflow.protocol.messages.find_coordinator import FindCoordinatorRequest

SETTLED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
TXN_TIMEOUT_MS = 1_000
MAX_AWAIT_POINTS = 100  # a path with more than this many suspensions is a bug in the test

OPERATIONS = [
    "init_new",
    "init_bump",
    "init_fence_ongoing",
    "add_partitions",
    "add_offsets",
    "txn_offset_commit",
    "end_commit",
    "end_abort",
]


class CancelAtSuspension:
    """Awaits `coro`, cancelling the awaiting task at the coroutine's `n`-th suspension (the
    task then cancels what the coroutine awaits there, as `Task.cancel()` always does)."""

    def __init__(self, coro, n: int) -> None:
        self.coro = coro
        self.n = n
        self.suspensions = 0

    def __await__(self):
        inner = self.coro.__await__()
        value, error = None, None
        while True:
            try:
                yielded = inner.throw(error) if error is not None else inner.send(value)
            except StopIteration as stop:
                return stop.value
            self.suspensions += 1
            if self.suspensions == self.n:
                asyncio.current_task().cancel()
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # noqa: BLE001 - passed on to the coroutine
                value, error = None, exc


async def _prepare(state, tid: str, op: str) -> tuple[int, int]:
    """Bring `tid` to where `op` is interesting; returns its producer id and epoch."""
    if op == "init_new":
        return -1, -1
    error, pid, epoch = await init(state, tid, timeout_ms=TXN_TIMEOUT_MS)
    assert error == ErrorCode.NONE
    if op in ("init_bump", "add_partitions", "add_offsets"):
        return pid, epoch
    if op == "txn_offset_commit":
        assert (await _add_offsets(state, tid, pid, epoch)).error_code == ErrorCode.NONE
        return pid, epoch
    assert set((await add_partitions(state, tid, pid, epoch, [0, 1])).values()) == {ErrorCode.NONE}
    return pid, epoch


def _add_offsets(state, tid, pid, epoch):
    request = AddOffsetsToTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    return call(state, ApiKey.ADD_OFFSETS_TO_TXN, 3, request)


def _operation(state, tid: str, op: str, pid: int, epoch: int):
    """The request under test, as a coroutine."""
    if op.startswith("init"):
        return init(state, tid, timeout_ms=TXN_TIMEOUT_MS)
    if op == "add_partitions":
        return add_partitions(state, tid, pid, epoch, [0, 1])
    if op == "add_offsets":
        return _add_offsets(state, tid, pid, epoch)
    if op == "txn_offset_commit":
        request = txn_commit_request(3, pid, epoch, {("t", 0): 5})
        request.transactional_id = tid
        return call(state, ApiKey.TXN_OFFSET_COMMIT, 3, request)
    return end_txn(state, tid, pid, epoch, op == "end_commit")


async def _settle(state, tid: str) -> TxnState | None:
    """Wait for what the broker finishes on its own, then run the timeout check as if
    `transaction.timeout.ms` had passed; the id's state afterwards."""
    coordinator = state.transactions.coordinator
    await coordinator.wait_for_completions()
    md = coordinator.get(tid)
    if md is not None and md.state is TxnState.ONGOING:
        later = coordinator.clock() + md.txn_timeout_ms + 1
        assert await coordinator.abort_timed_out_transactions(now_ms=later) == 1
        await coordinator.wait_for_completions()
    md = coordinator.get(tid)
    if md is None:
        return None
    assert not md.pending_transition_in_progress, md
    return md.state


async def _cancel_at_every_await_point(state, op: str) -> int:
    """Returns how many await points the operation's path had."""
    for n in range(1, MAX_AWAIT_POINTS + 1):
        tid = f"{op}-{n}"
        assert (await find_txn(state, tid)).error_code == ErrorCode.NONE
        pid, epoch = await _prepare(state, tid, op)
        attempt = CancelAtSuspension(_operation(state, tid, op, pid, epoch), n)
        task = asyncio.ensure_future(attempt)
        try:
            await task
        except asyncio.CancelledError:
            pass
        settled = await _settle(state, tid)
        assert settled in (None, *SETTLED), (op, n, settled)
        again, _, _ = await init(state, tid, timeout_ms=TXN_TIMEOUT_MS)
        assert again == ErrorCode.NONE, (op, n, again)
        if not task.cancelled():
            return n - 1
    raise AssertionError(f"{op}: still suspending after {MAX_AWAIT_POINTS} await points")


@pytest.mark.parametrize("op", OPERATIONS)
def test_every_await_point_cancelled_leaves_no_id_stuck(state_factory, op):
    state = state_factory(
        **{"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3}
    )
    create(state, "t", 2)

    async def scenario():
        state.load_coordinators()
        request = FindCoordinatorRequest(key="g", key_type=0)
        assert (await call(state, ApiKey.FIND_COORDINATOR, 3, request)).error_code == 0
        return await _cancel_at_every_await_point(state, op)

    points = run(state, scenario)
    print(f"{op}: {points} await points")
    assert points >= 1  # the path awaited something, so some cancellation hit it
