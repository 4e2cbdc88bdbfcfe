"""A transition that became durable always completes (issue 8, defect 3).

Each test drives the coordinator to one of the code paths that left a transactional id
answering CONCURRENT_TRANSACTIONS until a restart, and checks that it ends settled instead:
- the request that made PREPARE_* durable is cancelled while the append is in flight
  (EndTxn, and InitProducerId fencing an ONGOING transaction);
- the completion (markers, then COMPLETE_*) raises: it is logged and retried.
"""

from __future__ import annotations

import asyncio

import pytest

from coordinator.txn.txn_helpers import TP0, TP1, begin, coordinator_env, markers_on
from onceflow.coordinator.txn.markers import InProcessTxnMarkerChannel
from onceflow.coordinator.txn.state import TxnState
from onceflow.protocol.errors import ErrorCode
from onceflow.records.control import ControlRecordType

SETTLED = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


class GatedAppends:
    """Wraps `state_log.append`: an append of state `gated` waits for `gate`; `durable` is set
    once it has returned."""

    def __init__(self, state_log, gated: TxnState) -> None:
        self.inner = state_log.append
        self.gated = gated
        self.reached = asyncio.Event()
        self.gate = asyncio.Event()
        self.durable = asyncio.Event()
        state_log.append = self

    async def __call__(self, transactional_id, transit, now_ms):
        if transit.txn_state is not self.gated:
            return await self.inner(transactional_id, transit, now_ms)
        self.reached.set()
        await self.gate.wait()
        try:
            return await self.inner(transactional_id, transit, now_ms)
        finally:
            self.durable.set()


async def _cancel_mid_append(c, request, gated: TxnState):
    appends = GatedAppends(c.state_log, gated)
    task = asyncio.ensure_future(request())
    await appends.reached.wait()
    task.cancel()
    appends.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await appends.durable.wait()
    await asyncio.sleep(0)  # the owned append task finishes its step
    await c.wait_for_completions()


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_cancelled_after_prepare_still_completes(tmp_path, commit):
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            init = await begin(c)
            pid = init.producer_id
            gated = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            await _cancel_mid_append(c, lambda: c.handle_end_txn("tx", pid, 0, commit), gated)
            md = c.get("tx")
            assert md.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
            assert not md.pending_transition_in_progress
            assert [ControlRecordType(m[2].control_type).name for m in markers_on(c.logs, TP0)] == [
                "COMMIT" if commit else "ABORT"
            ]
            again = await c.handle_init_producer_id("tx", 60_000)
            assert again.error == ErrorCode.NONE

    asyncio.run(main())


def test_init_producer_id_cancelled_while_fencing_still_aborts(tmp_path):
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            await begin(c)
            await _cancel_mid_append(
                c, lambda: c.handle_init_producer_id("tx", 60_000), TxnState.PREPARE_ABORT
            )
            md = c.get("tx")
            assert md.state is TxnState.COMPLETE_ABORT
            assert not md.pending_transition_in_progress
            assert (await c.handle_init_producer_id("tx", 60_000)).error == ErrorCode.NONE

    asyncio.run(main())


class FlakyChannel:
    """A marker channel whose first `failures` calls raise."""

    def __init__(self, logs, failures: int = 1) -> None:
        self.inner = InProcessTxnMarkerChannel(logs)
        self.listeners = self.inner.listeners
        self.failures = failures
        self.calls = 0

    async def write_markers(self, *args):
        self.calls += 1
        if self.calls <= self.failures:
            raise OSError("marker channel broke")
        return await self.inner.write_markers(*args)


def test_completion_that_raises_writing_markers_is_retried(tmp_path, caplog):
    async def main():
        async with coordinator_env(str(tmp_path), channel=FlakyChannel) as c:
            init = await begin(c)
            assert await c.handle_end_txn("tx", init.producer_id, 0, True) == ErrorCode.NONE
            await c.wait_for_completions()
            assert c.markers.calls == 2
            md = c.get("tx")
            assert md.state is TxnState.COMPLETE_COMMIT
            assert not md.pending_transition_in_progress
            assert [ControlRecordType(m[2].control_type).name for m in markers_on(c.logs, TP1)] == [
                "COMMIT"
            ]

    asyncio.run(main())
    assert "completing COMPLETE_COMMIT for 'tx' failed; retrying" in caplog.text
    assert "marker channel broke" in caplog.text


def test_completion_that_raises_appending_complete_is_retried(tmp_path):
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            init = await begin(c)
            inner = c.state_log.append
            raised = []

            async def append(tid, transit, now_ms):
                if transit.txn_state is TxnState.COMPLETE_ABORT and not raised:
                    raised.append(transit)
                    raise OSError("disk went away")
                return await inner(tid, transit, now_ms)

            c.state_log.append = append
            assert await c.handle_end_txn("tx", init.producer_id, 0, False) == ErrorCode.NONE
            await c.wait_for_completions()
            assert raised
            assert c.get("tx").state is TxnState.COMPLETE_ABORT
            assert not c.get("tx").pending_transition_in_progress

    asyncio.run(main())
