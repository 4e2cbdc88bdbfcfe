"""Transactional offset commits (KIP-98, KIP-447): pending until the marker, fencing, reload."""

from __future__ import annotations

import asyncio

from coordinator.group.group_helpers import TP0, TP1, committed, offsets, run, stable_group
from onceflow.coordinator.group.coordinator import GroupCoordinator
from onceflow.log.producer_state import AppendOrigin
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import parse_header
from onceflow.records.control import ControlRecordType, build_control_batch

E = ErrorCode
PID, EPOCH = 4000, 2


async def txn_commit(c: GroupCoordinator, group="g", generation=-1, member="", instance=None,
                     epoch=EPOCH, **by_partition):  # fmt: skip
    result = await c.txn_offset_commit(
        "tx-1", group, PID, epoch, generation, member, instance, offsets(**by_partition)
    )
    return set(result.values())


async def write_marker(c: GroupCoordinator, group: str, commit: bool, epoch: int = EPOCH) -> None:
    """What the transaction coordinator does: append the marker, wait, then tell us."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    log = c.storage.log_for(group)
    result = log.append(
        build_control_batch(PID, epoch, kind, 0, 1), origin=AppendOrigin.COORDINATOR
    )
    assert result.error == E.NONE
    assert await c.storage.durable(log, result.next_offset) == E.NONE
    c.on_txn_marker(c.partition_for(group), PID, commit)


async def stable_fetch(c: GroupCoordinator, group="g"):
    result = await c.fetch_offsets(group, [TP0], require_stable=True)
    return result.partitions[TP0].error


def test_pending_until_commit_marker(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await c.commit_offsets("g", -1, "", None, offsets(p0=3))
        assert await txn_commit(c, p0=10, p1=11) == {E.NONE}
        pending = (await committed(c, "g", TP0), await committed(c, "g", TP1))
        unstable = await stable_fetch(c)
        batch = c.storage.log_for("g").read(1, 1 << 20).records  # the txn batch, header only
        header = parse_header(batch)
        await write_marker(c, "g", commit=True)
        done = (await committed(c, "g", TP0), await committed(c, "g", TP1))
        return pending, unstable, header, done, await stable_fetch(c)

    pending, unstable, header, done, stable = run(tmp_path, scenario)
    assert pending == (3, -1) and unstable == E.UNSTABLE_OFFSET_COMMIT
    assert header.is_transactional and (header.producer_id, header.producer_epoch) == (PID, EPOCH)
    assert header.base_sequence == -1
    assert done == (10, 11) and stable == E.NONE


def test_abort_marker_drops_offsets(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await c.commit_offsets("g", -1, "", None, offsets(p0=3))
        await txn_commit(c, p0=10)
        await write_marker(c, "g", commit=False)
        return await committed(c, "g", TP0), await stable_fetch(c)

    assert run(tmp_path, scenario) == (3, E.NONE)


def test_reload_before_marker_keeps_offsets_pending(tmp_path) -> None:
    async def first(c: GroupCoordinator):
        await c.commit_offsets("g", -1, "", None, offsets(p0=3))
        await txn_commit(c, p0=10)

    run(tmp_path, first)

    async def second(c: GroupCoordinator):
        before = (await committed(c, "g", TP0), await stable_fetch(c))
        await write_marker(c, "g", commit=True)  # the transaction coordinator's recovery
        return before, await committed(c, "g", TP0)

    before, after = run(tmp_path, second)
    assert before == (3, E.UNSTABLE_OFFSET_COMMIT) and after == 10

    async def third(c: GroupCoordinator):
        return await committed(c, "g", TP0), await stable_fetch(c)

    assert run(tmp_path, third) == (10, E.NONE)  # the marker is replayed from the log


def test_reload_applies_abort_marker(tmp_path) -> None:
    async def first(c: GroupCoordinator):
        await c.commit_offsets("g", -1, "", None, offsets(p0=3))
        await txn_commit(c, p0=10)
        await write_marker(c, "g", commit=False)

    run(tmp_path, first)

    async def second(c: GroupCoordinator):
        return await committed(c, "g", TP0), await stable_fetch(c)

    assert run(tmp_path, second) == (3, E.NONE)


def test_later_plain_commit_wins_over_earlier_txn_commit(tmp_path) -> None:
    """Kafka keeps whichever record sits later in the log when the marker lands."""

    async def scenario(c: GroupCoordinator):
        await txn_commit(c, p0=10, p1=10)  # txn record first
        await c.commit_offsets("g", -1, "", None, offsets(p0=20))  # plain record after it
        await write_marker(c, "g", commit=True)
        return await committed(c, "g", TP0), await committed(c, "g", TP1)

    assert run(tmp_path, scenario) == (20, 10)

    async def reloaded(c: GroupCoordinator):
        return await committed(c, "g", TP0), await committed(c, "g", TP1)

    assert run(tmp_path, reloaded) == (20, 10)


def test_later_txn_commit_wins_over_earlier_plain_commit(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await c.commit_offsets("g", -1, "", None, offsets(p0=20))
        await txn_commit(c, p0=10)
        await write_marker(c, "g", commit=True)
        return await committed(c, "g", TP0)

    assert run(tmp_path, scenario) == 10


def test_kip447_fencing(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        members = await stable_group(c, "g", members=1, instance=None)
        me = members[0]
        ok = await txn_commit(c, generation=1, member=me.member_id, p0=1)
        stale = await txn_commit(c, generation=0, member=me.member_id, p0=2)
        unknown = await txn_commit(c, generation=1, member="zombie", p0=3)
        old_style = await txn_commit(c, p0=4)  # v0-v2: no generation, accepted in any state
        return ok, stale, unknown, old_style

    ok, stale, unknown, old_style = run(tmp_path, scenario)
    assert ok == {E.NONE} and stale == {E.ILLEGAL_GENERATION}
    assert unknown == {E.UNKNOWN_MEMBER_ID} and old_style == {E.NONE}


def test_kip447_fencing_after_rebalance_and_static_instance(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        first = await c.membership.join("g", "", "i-1", "consumer", [("range", b"")], 10_000, 5_000,
                             api_version=5)  # fmt: skip
        await c.membership.sync("g", 1, first.member_id, "i-1", assignments={first.member_id: b""})
        again = await c.membership.join("g", "", "i-1", "consumer", [("range", b"")], 10_000, 5_000,
                             api_version=5)  # fmt: skip
        fenced = await txn_commit(c, generation=1, member=first.member_id, instance="i-1", p0=1)
        current = await txn_commit(c, generation=1, member=again.member_id, instance="i-1", p0=2)
        return fenced, current

    assert run(tmp_path, scenario) == ({E.FENCED_INSTANCE_ID}, {E.NONE})


def test_stale_producer_epoch_is_rejected_by_the_log(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await txn_commit(c, p0=1, epoch=5)
        await write_marker(c, "g", commit=True, epoch=5)
        return await txn_commit(c, p0=2, epoch=4), await committed(c, "g", TP0)

    assert run(tmp_path, scenario) == ({E.INVALID_PRODUCER_EPOCH}, 1)


def test_offset_delete_drops_pending_txn_offsets(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await c.commit_offsets("g", -1, "", None, offsets(p0=1))
        await txn_commit(c, p0=5)
        deleted = await c.delete_offsets("g", [TP0])
        await write_marker(c, "g", commit=True)
        return deleted, await committed(c, "g", TP0), await stable_fetch(c)

    deleted, after, stable = run(tmp_path, scenario)
    assert deleted == (E.NONE, {TP0: E.NONE}) and after == -1 and stable == E.NONE

    async def reloaded(c: GroupCoordinator):
        return await committed(c, "g", TP0)

    assert run(tmp_path, reloaded) == -1  # the plain tombstone also clears it on replay


def test_commits_cancelled_while_being_made_durable_still_finish(tmp_path) -> None:
    """The request's task is cancelled while its offsets are being fsynced (issue 8): the
    write is durable, so the commit finishes anyway - installed, and not left in flight."""

    async def scenario(c: GroupCoordinator):
        gate = asyncio.Event()
        inner = c.storage.durable

        async def gated_durable(log, next_offset):
            await gate.wait()
            return await inner(log, next_offset)

        c.storage.durable = gated_durable
        plain = asyncio.ensure_future(c.commit_offsets("g", -1, "", None, offsets(p0=5)))
        txn = asyncio.ensure_future(txn_commit(c, p1=7))
        await asyncio.sleep(0)
        for task in (plain, txn):
            task.cancel()
        gate.set()
        await asyncio.gather(plain, txn, return_exceptions=True)
        # the finishing writes (none when the request's task did the work)
        await c.store.finish_tasks()
        in_flight = dict(c.groups["g"].offsets.in_flight)
        c.storage.durable = inner
        await write_marker(c, "g", commit=True)
        return in_flight, await committed(c, "g", TP0), await committed(c, "g", TP1)

    assert run(tmp_path, scenario) == ({}, 5, 7)
