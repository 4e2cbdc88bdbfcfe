"""The coordinator in-process over a real LogManager: commit, abort, crash, timeouts, expiry."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from coordinator.txn.txn_helpers import (
    TEST_CONFIG,
    TP0,
    TP1,
    Clock,
    GatedChannel,
    begin,
    coordinator_env,
    markers_on,
    state_records,
)
from onceflow.common import TopicPartition
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.faults import CRASH_AFTER_PREPARE_ENV
from onceflow.coordinator.txn.markers import InProcessTxnMarkerChannel
from onceflow.coordinator.txn.metadata import MAX_PRODUCER_EPOCH, TransactionMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.log.producer_state import AppendOrigin
from onceflow.protocol.errors import ErrorCode
from onceflow.records.builder import BatchBuilder
from onceflow.records.control import ControlRecordType

ROOT = Path(__file__).resolve().parents[3]


def produce(coordinator, tp, producer_id, epoch, sequence=0):
    """A transactional client batch appended straight to the partition log."""
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )
    builder.append(None, b"k", b"v")
    log = coordinator.logs.get_log(tp.topic, tp.partition)
    return log.append(builder.build(), origin=AppendOrigin.CLIENT)


async def settle(coordinator, tp):
    """Wait until the partition's appended data is fsynced (so the LSO/HW reflect it)."""
    log = coordinator.logs.get_log(tp.topic, tp.partition)
    await coordinator.logs.committer.flushed(log, log.log_end_offset)
    return log


def test_commit_writes_markers_and_complete(tmp_path) -> None:
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            init = await begin(c)
            for tp in (TP0, TP1):
                assert produce(c, tp, init.producer_id, init.producer_epoch).error == ErrorCode.NONE
            log0 = await settle(c, TP0)
            assert log0.last_stable_offset == 0  # the open transaction pins the LSO
            assert await c.handle_end_txn("tx", init.producer_id, 0, True) == ErrorCode.NONE
            await c.wait_for_completions()
            for tp in (TP0, TP1):
                [(pid, epoch, marker)] = markers_on(c.logs, tp)
                assert (pid, epoch) == (init.producer_id, init.producer_epoch)
                assert marker.control_type == ControlRecordType.COMMIT
                assert marker.coordinator_epoch == c.coordinator_epoch
            log0 = await settle(c, TP0)
            assert log0.last_stable_offset == log0.log_end_offset == 2
            states = [t.txn_state for t in state_records(c, "tx")]
            assert states == [
                TxnState.EMPTY,
                TxnState.ONGOING,
                TxnState.PREPARE_COMMIT,
                TxnState.COMPLETE_COMMIT,
            ]
            assert state_records(c, "tx")[2].topic_partitions == {TP0, TP1}

    asyncio.run(main())


def test_requests_during_marker_sending_get_concurrent(tmp_path) -> None:
    async def main():
        channels = []

        def gated(logs):
            channels.append(GatedChannel(InProcessTxnMarkerChannel(logs)))
            return channels[0]

        async with coordinator_env(str(tmp_path), channel=gated) as c:
            init = await begin(c)
            pid = init.producer_id
            assert await c.handle_end_txn("tx", pid, 0, True) == ErrorCode.NONE
            await asyncio.sleep(0.01)
            assert channels[0].calls == 1  # the markers are on their way
            md = c.get("tx")
            assert (md.state, md.pending_state) == (
                TxnState.PREPARE_COMMIT,
                TxnState.COMPLETE_COMMIT,
            )
            concurrent = ErrorCode.CONCURRENT_TRANSACTIONS
            assert await c.handle_end_txn("tx", pid, 0, True) == concurrent
            assert (await c.handle_add_partitions("tx", pid, 0, [TP0]))[TP0] == concurrent
            assert (await c.handle_init_producer_id("tx", 1000)).error == concurrent
            channels[0].gate.set()
            await c.wait_for_completions()
            assert c.get("tx").state is TxnState.COMPLETE_COMMIT
            assert await c.handle_end_txn("tx", pid, 0, True) == ErrorCode.NONE  # retry: fine
            again = await c.handle_init_producer_id("tx", 1000)
            assert (again.error, again.producer_id, again.producer_epoch) == (
                ErrorCode.NONE,
                pid,
                1,
            )

    asyncio.run(main())


def test_crash_after_prepare_commit_is_completed_on_load(tmp_path) -> None:
    """Drop everything once PREPARE_COMMIT is durable (markers never sent), reload."""

    async def main():
        def never(logs):
            return GatedChannel(InProcessTxnMarkerChannel(logs))  # the gate never opens

        async with coordinator_env(str(tmp_path), channel=never, clean=False) as c:
            init = await begin(c)
            assert produce(c, TP0, init.producer_id, 0).error == ErrorCode.NONE
            assert await c.handle_end_txn("tx", init.producer_id, 0, True) == ErrorCode.NONE
            first_epoch = c.coordinator_epoch
        async with coordinator_env(str(tmp_path)) as c:
            assert c.coordinator_epoch == first_epoch + 1
            await c.wait_for_completions()
            assert c.get("tx").state is TxnState.COMPLETE_COMMIT
            for tp in (TP0, TP1):
                [(_, _, marker)] = markers_on(c.logs, tp)
                assert marker.control_type == ControlRecordType.COMMIT
                assert marker.coordinator_epoch == first_epoch + 1
            assert state_records(c, "tx")[-1].txn_state is TxnState.COMPLETE_COMMIT

    asyncio.run(main())


CRASH_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {helpers!r})
    from txn_helpers import begin, coordinator_env
    from onceflow.coordinator.txn.config import TxnConfig

    async def main():
        config = TxnConfig.from_properties({{"transaction.state.log.num.partitions": 3}})
        assert config.crash_after_prepare
        async with coordinator_env({path!r}, config=config, clean=False) as c:
            init = await begin(c)
            await c.handle_end_txn("tx", init.producer_id, init.producer_epoch, True)
            print("not reached")

    asyncio.run(main())
    """
)


def test_test_only_crash_hook_exits_137_and_recovery_commits(tmp_path) -> None:
    script = CRASH_SCRIPT.format(helpers=str(Path(__file__).parent), path=str(tmp_path))
    env = {**os.environ, CRASH_AFTER_PREPARE_ENV: "true"}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 137, proc.stderr
    assert "not reached" not in proc.stdout

    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            await c.wait_for_completions()
            assert c.get("tx").state is TxnState.COMPLETE_COMMIT
            assert [m.control_type for _, _, m in markers_on(c.logs, TP0)] == [
                ControlRecordType.COMMIT
            ]

    asyncio.run(main())


def test_timed_out_transaction_is_aborted_and_producer_fenced(tmp_path) -> None:
    async def main():
        clock = Clock()
        async with coordinator_env(str(tmp_path), clock=clock) as c:
            init = await begin(c, timeout_ms=5_000)
            pid = init.producer_id
            assert produce(c, TP0, pid, 0).error == ErrorCode.NONE
            clock.now += 4_999
            assert await c.abort_timed_out_transactions() == 0
            clock.now += 2
            assert await c.abort_timed_out_transactions() == 1
            await c.wait_for_completions()
            md = c.get("tx")
            assert (md.state, md.producer_epoch) == (TxnState.COMPLETE_ABORT, 1)
            [(m_pid, m_epoch, marker)] = markers_on(c.logs, TP0)
            assert (m_pid, m_epoch, marker.control_type) == (pid, 1, ControlRecordType.ABORT)
            # the old producer is fenced at the coordinator and on the partition
            assert await c.handle_end_txn("tx", pid, 0, True) == ErrorCode.PRODUCER_FENCED
            late = produce(c, TP0, pid, 0, sequence=1)
            assert late.error in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
            log0 = await settle(c, TP0)
            assert log0.last_stable_offset == log0.log_end_offset
            # the aborted transaction is indexed for read_committed fetches
            assert log0.collect_aborted_transactions(0, log0.log_end_offset) == [(pid, 0)]
            assert (await c.handle_init_producer_id("tx", 5_000)).producer_epoch == 2

    asyncio.run(main())


def test_abort_timer_runs_periodically(tmp_path) -> None:
    async def main():
        clock = Clock()
        config = TxnConfig(
            transaction_state_log_num_partitions=3,
            abort_timed_out_transaction_cleanup_interval_ms=20,
        )
        async with coordinator_env(str(tmp_path), clock=clock, config=config) as c:
            await begin(c, timeout_ms=1_000)
            c.start()
            clock.now += 1_001
            for _ in range(200):
                await asyncio.sleep(0.01)
                if c.get("tx").state is TxnState.COMPLETE_ABORT:
                    break
            assert c.get("tx").state is TxnState.COMPLETE_ABORT

    asyncio.run(main())


def test_init_on_ongoing_fences_and_aborts_then_retry_bumps_again(tmp_path) -> None:
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            init = await begin(c)
            retry = await c.handle_init_producer_id("tx", 60_000)
            assert retry.error == ErrorCode.CONCURRENT_TRANSACTIONS
            await c.wait_for_completions()
            assert [m.control_type for _, e, m in markers_on(c.logs, TP0) if e == 1] == [
                ControlRecordType.ABORT
            ]
            again = await c.handle_init_producer_id("tx", 60_000)
            assert (again.error, again.producer_id, again.producer_epoch) == (
                ErrorCode.NONE,
                init.producer_id,
                2,
            )

    asyncio.run(main())


def test_expired_transactional_id(tmp_path) -> None:
    async def main():
        clock = Clock()
        async with coordinator_env(str(tmp_path), clock=clock) as c:
            init = await c.handle_init_producer_id("tx", 60_000)
            await begin(c, "busy")
            clock.now += TEST_CONFIG.transactional_id_expiration_ms
            assert await c.expire_transactional_ids() == 1  # "busy" is ONGOING: kept
            assert c.get("tx") is None and c.get("busy") is not None
            assert state_records(c, "tx")[-1] is None  # a tombstone
            errors = await c.handle_add_partitions("tx", init.producer_id, 0, [TP0])
            assert errors[TP0] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
            [described] = c.describe_transactions(["tx"])
            assert described.error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        async with coordinator_env(str(tmp_path), clock=clock) as c:
            assert c.get("tx") is None and c.get("busy").state is TxnState.ONGOING
            fresh = await c.handle_init_producer_id("tx", 60_000)
            assert fresh.producer_id != init.producer_id and fresh.producer_epoch == 0

    asyncio.run(main())


def test_state_is_recovered_from_the_log(tmp_path) -> None:
    async def main():
        clock = Clock()
        async with coordinator_env(str(tmp_path), clock=clock, clean=False) as c:
            init = await begin(c, "a", parts=[TP1])
            await c.handle_init_producer_id("b", 1234)
            before = {tid: c.get(tid).snapshot() for tid in ("a", "b")}
            epoch = c.coordinator_epoch
        async with coordinator_env(str(tmp_path), clock=clock) as c:
            assert {tid: c.get(tid).snapshot() for tid in ("a", "b")} == before
            assert c.get("a").topic_partitions == {TP1}
            assert c.coordinator_epoch == epoch + 1
            ok = await c.handle_end_txn("a", init.producer_id, init.producer_epoch, False)
            assert ok == ErrorCode.NONE

    asyncio.run(main())


def test_epoch_exhaustion_rotates_producer_id(tmp_path) -> None:
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            exhausted = MAX_PRODUCER_EPOCH - 1
            c.put_transaction_state(
                TransactionMetadata(
                    "tx", 77, producer_epoch=exhausted, txn_timeout_ms=1000,
                    state=TxnState.COMPLETE_COMMIT, txn_last_update_timestamp=c.clock(),
                )
            )  # fmt: skip
            rotated = await c.handle_init_producer_id("tx", 1000, (77, exhausted))
            assert rotated.error == ErrorCode.NONE
            assert rotated.producer_id != 77 and rotated.producer_epoch == 0
            assert c.get("tx").previous_producer_id == 77
            # the same request retried (its answer was lost): same id and epoch, no new bump
            retry = await c.handle_init_producer_id("tx", 1000, (77, exhausted))
            assert (retry.producer_id, retry.producer_epoch) == (rotated.producer_id, 0)
            stale = await c.handle_init_producer_id("tx", 1000, (77, 3))
            assert stale.error == ErrorCode.PRODUCER_FENCED

    asyncio.run(main())


def test_offsets_marker_calls_group_hook(tmp_path) -> None:
    async def main():
        seen = []
        topics = {"t": 2, "__consumer_offsets": 2}
        async with coordinator_env(str(tmp_path), topics=topics) as c:
            c.add_marker_listener(lambda tp, pid, commit: seen.append((tp, pid, commit)))
            init = await begin(c, parts=[TP0])
            pid = init.producer_id
            assert await c.handle_add_offsets("tx", pid, 0, "g1") == ErrorCode.NONE
            offsets_tp = next(tp for tp in c.get("tx").topic_partitions if tp != TP0)
            assert await c.handle_end_txn("tx", pid, 0, True) == ErrorCode.NONE
            await c.wait_for_completions()
            assert seen == [(offsets_tp, pid, True)]  # only the __consumer_offsets partition

    asyncio.run(main())


def test_idempotent_producer_ids_and_validation(tmp_path) -> None:
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            a = await c.handle_init_producer_id(None, 0)
            b = await c.handle_init_producer_id(None, 0)
            assert a.error == b.error == ErrorCode.NONE and a.producer_id != b.producer_id
            assert a.producer_epoch == 0
            too_long = TEST_CONFIG.transaction_max_timeout_ms + 1
            for timeout in (0, -5, too_long):
                result = await c.handle_init_producer_id("tx", timeout)
                assert result.error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
            assert (await c.handle_init_producer_id("", 1000)).error == ErrorCode.INVALID_REQUEST
            missing = await c.handle_add_partitions("tx2", 1, 0, [TP0, TopicPartition("nope", 0)])
            assert missing == {
                TP0: ErrorCode.OPERATION_NOT_ATTEMPTED,
                TopicPartition("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }

    asyncio.run(main())


def test_verify_only_and_batched_add_partitions(tmp_path) -> None:
    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            init = await begin(c, parts=[TP0])
            pid = init.producer_id
            result = await c.handle_add_partitions_batch(
                [("tx", pid, 0, [TP0, TP1], True), ("other", 5, 0, [TP0], True)]
            )
            assert result == {
                "tx": {TP0: ErrorCode.NONE, TP1: ErrorCode.INVALID_TXN_STATE},
                "other": {TP0: ErrorCode.INVALID_PRODUCER_ID_MAPPING},
            }
            assert c.get("tx").topic_partitions == {TP0}  # verification changes nothing
            # Produce's synchronous check of one partition gives the same answers
            assert c.verify_partition("tx", pid, 0, TP0) == ErrorCode.NONE
            assert c.verify_partition("tx", pid, 0, TP1) == ErrorCode.INVALID_TXN_STATE
            assert c.verify_partition("tx", pid, 1, TP0) == ErrorCode.PRODUCER_FENCED
            assert c.verify_partition("nobody", pid, 0, TP0) == (
                ErrorCode.INVALID_PRODUCER_ID_MAPPING
            )

    asyncio.run(main())


def test_describe_list_and_abort_hanging(tmp_path) -> None:
    async def main():
        clock = Clock()
        async with coordinator_env(str(tmp_path), clock=clock) as c:
            init = await begin(c, "a", parts=[TP0])
            await c.handle_init_producer_id("b", 2000)
            clock.now += 100
            [a, missing] = c.describe_transactions(["a", "zzz"])
            assert (a.error, a.state, a.producer_id, dict(a.topics)) == (
                ErrorCode.NONE, "Ongoing", init.producer_id, {"t": [0]},
            )  # fmt: skip
            assert missing.error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            listed = c.list_transactions(["Ongoing", "Bogus"])
            assert [t.transactional_id for t in listed.transactions] == ["a"]
            assert listed.unknown_state_filters == ["Bogus"]
            everything = c.list_transactions().transactions
            assert [(t.transactional_id, t.state) for t in everything] == [
                ("a", "Ongoing"),
                ("b", "Empty"),
            ]
            # Kafka compares now - start; an EMPTY id (start -1) passes any duration filter
            assert [t.transactional_id for t in c.list_transactions([], [], 100).transactions] == [
                "b"
            ]
            assert len(c.list_transactions(duration_filter_ms=99).transactions) == 2
            assert (
                c.list_transactions(producer_id_filters=[init.producer_id])
                .transactions[0]
                .transactional_id
                == "a"
            )
            # a hanging transaction: a producer wrote, its coordinator never will end it
            hanging_pid = 4242
            assert produce(c, TP1, hanging_pid, 3).error == ErrorCode.NONE
            log1 = await settle(c, TP1)
            assert log1.last_stable_offset == 0
            stale = await c.abort_hanging_transaction(TP1, hanging_pid, 2, 0)
            assert stale == ErrorCode.INVALID_PRODUCER_EPOCH
            assert await c.abort_hanging_transaction(TP1, hanging_pid, 3, 0) == ErrorCode.NONE
            log1 = await settle(c, TP1)
            assert log1.last_stable_offset == log1.log_end_offset == 2

    asyncio.run(main())


def test_caller_cancelled_mid_append_does_not_leave_the_transition_pending(tmp_path) -> None:
    """A handler task cancelled while its transition is being appended (its connection closed)
    must not leave the transactional id stuck answering CONCURRENT_TRANSACTIONS."""

    async def main():
        async with coordinator_env(str(tmp_path)) as c:
            init = await begin(c, parts=(TP0,))
            pid = init.producer_id
            add = asyncio.ensure_future(c.handle_add_partitions("tx", pid, 0, [TP1]))
            await asyncio.sleep(0)  # prepared and appending: the fsync has not finished yet
            assert c.get("tx").pending_transition_in_progress
            add.cancel()
            await asyncio.sleep(0.5)  # the append finishes anyway
            md = c.get("tx")
            assert not md.pending_transition_in_progress
            assert TP1 in md.topic_partitions  # durable, so completed in memory too
            assert await c.handle_end_txn("tx", pid, 0, False) == ErrorCode.NONE
            await c.wait_for_completions()
            assert c.get("tx").state is TxnState.COMPLETE_ABORT

    asyncio.run(main())
