"""Rebalances with several members, timeouts, the member-id handshake and static membership."""

from __future__ import annotations

import asyncio
import time

from coordinator.group.group_helpers import (
    PROTOCOLS,
    config,
    join,
    join_with_id,
    run,
    stable_group,
    subscription,
)
from onceflow.coordinator.group.coordinator import GroupCoordinator
from onceflow.coordinator.group.state import GroupState
from onceflow.protocol.errors import ErrorCode

E = ErrorCode


def test_three_members_one_never_rejoins(tmp_path) -> None:
    """A and B rejoin; C stays silent (long session): the rebalance timeout drops C."""

    async def scenario(c: GroupCoordinator):
        first = await stable_group(c, members=3, rebalance_ms=300, session_ms=30_000)
        assert {r.generation_id for r in first} == {1}
        leader = first[0].leader
        others = [r.member_id for r in first if r.member_id != leader]
        start = time.monotonic()
        a, b = await asyncio.gather(
            join(c, "g", leader, rebalance_ms=300, session_ms=30_000),
            join(c, "g", others[0], rebalance_ms=300, session_ms=30_000),
        )
        return first, others, a, b, time.monotonic() - start, c.groups["g"]

    first, others, a, b, elapsed, group = run(tmp_path, scenario)
    assert a.error == b.error == E.NONE and a.generation_id == b.generation_id == 2
    assert 0.25 <= elapsed < 2.0
    assert {m.member_id for m in a.members} == {a.member_id, b.member_id}  # leader sees 2
    assert b.members == ()  # followers get no member list
    assert others[1] not in group.members and group.state is GroupState.COMPLETING_REBALANCE


def test_session_timeout_removes_silent_member(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        results = await stable_group(c, members=2, session_ms=200, rebalance_ms=1_000)
        alive, silent = results[0], results[1]
        answers = []
        for _ in range(8):  # keep `alive` alive for 400 ms
            await asyncio.sleep(0.05)
            answers.append(await c.membership.heartbeat("g", 1, alive.member_id, None))
        rejoin = await join(c, "g", alive.member_id, session_ms=200, rebalance_ms=1_000)
        return answers, rejoin, silent.member_id, c.groups["g"]

    answers, rejoin, silent_id, group = run(tmp_path, scenario)
    assert answers[0] == E.NONE and answers[-1] == E.REBALANCE_IN_PROGRESS
    assert rejoin.error == E.NONE and rejoin.generation_id == 2
    assert [m.member_id for m in rejoin.members] == [rejoin.member_id]
    assert silent_id not in group.members


def test_last_member_expiring_empties_group(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await stable_group(c, members=1, session_ms=100, rebalance_ms=100)
        await asyncio.sleep(0.4)
        group = c.groups["g"]
        log = c.storage.log_for("g")
        return group.state, group.generation_id, log.log_end_offset

    state, generation, end = run(tmp_path, scenario)
    assert (state, generation) == (GroupState.EMPTY, 2)
    assert end == 2  # the generation-1 assignment, then the empty generation-2 record


def test_member_id_required_from_v4(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        v4 = await join(c, "g", api_version=4)
        pending = c.groups["g"].pending_members.copy()
        v3 = await join(c, "other", api_version=3)
        return v4, pending, v3

    v4, pending, v3 = run(tmp_path, scenario)
    assert v4.error == E.MEMBER_ID_REQUIRED and v4.member_id.startswith("client-")
    assert list(pending) == [v4.member_id]
    assert v3.error == E.NONE and v3.generation_id == 1  # no handshake before v4


def test_pending_member_that_never_returns_does_not_block(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        first = await stable_group(c, members=1, session_ms=150)
        await join(c, "g", session_ms=150)  # MEMBER_ID_REQUIRED; never comes back
        start = time.monotonic()
        rejoin = await join(c, "g", first[0].leader, session_ms=150, rebalance_ms=5_000)
        return rejoin, time.monotonic() - start

    rejoin, elapsed = run(tmp_path, scenario)
    assert rejoin.error == E.NONE and rejoin.generation_id == 2
    assert elapsed < 1.0  # the pending id expired after its session timeout, not 5 s


def test_session_timeout_bounds(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        low = await join(c, "g", session_ms=5)
        high = await join(c, "g", session_ms=60_001)
        return low.error, high.error, "g" in c.groups

    assert run(tmp_path, scenario) == (E.INVALID_SESSION_TIMEOUT, E.INVALID_SESSION_TIMEOUT, False)


def test_initial_rebalance_delay_collects_late_joiners(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        start = time.monotonic()
        first = asyncio.ensure_future(join_with_id(c))
        await asyncio.sleep(0.1)
        second = await join_with_id(c)
        return await first, second, time.monotonic() - start

    a, b, elapsed = run(tmp_path, scenario, group_config=config(initial_rebalance_delay_ms=250))
    assert a.generation_id == b.generation_id == 1
    assert len(a.members if a.members else b.members) == 2
    assert elapsed >= 0.3  # the delay restarted when the second member arrived


def test_protocol_selection_and_inconsistent_protocol(tmp_path) -> None:
    sub = subscription("orders")

    async def scenario(c: GroupCoordinator):
        a, b = await asyncio.gather(
            join_with_id(c, protocols=[("range", sub), ("roundrobin", sub)]),
            join_with_id(c, protocols=[("roundrobin", sub)]),
        )
        bad_protocol = await join(c, "g", protocols=[("sticky", sub)], api_version=3)
        bad_type = await join(c, "g", protocol_type="connect", api_version=3)
        return a, b, bad_protocol.error, bad_type.error

    a, b, bad_protocol, bad_type = run(tmp_path, scenario)
    assert a.protocol_name == b.protocol_name == "roundrobin"
    assert bad_protocol == bad_type == E.INCONSISTENT_GROUP_PROTOCOL


def test_follower_that_never_syncs_is_removed(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        a, b = await asyncio.gather(
            join_with_id(c, rebalance_ms=300), join_with_id(c, rebalance_ms=300)
        )
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        sync = await c.membership.sync(
            "g", 1, leader.member_id, assignments={leader.member_id: b"x"}
        )
        await asyncio.sleep(0.4)  # the pending-sync timer (300 ms) fired
        group = c.groups["g"]
        state, follower_still_there = group.state, follower.member_id in group.members
        rejoin = await join(c, "g", leader.member_id, rebalance_ms=300)
        return sync, follower_still_there, state, rejoin

    sync, follower_still_there, state, rejoin = run(tmp_path, scenario)
    assert sync.error == E.NONE and sync.assignment == b"x"
    assert not follower_still_there and state is GroupState.PREPARING_REBALANCE
    assert rejoin.generation_id == 2 and [m.member_id for m in rejoin.members] == [rejoin.member_id]


def test_sync_distributes_leader_assignment(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        a, b = await asyncio.gather(join_with_id(c), join_with_id(c))
        leader, follower = (a, b) if a.leader == a.member_id else (b, a)
        waiting = asyncio.ensure_future(c.membership.sync("g", 1, follower.member_id))
        await asyncio.sleep(0.02)
        assert not waiting.done()  # followers wait for the leader
        plan = {leader.member_id: b"L", follower.member_id: b"F"}
        mine = await c.membership.sync("g", 1, leader.member_id, assignments=plan)
        return mine, await waiting, c.groups["g"].state

    mine, theirs, state = run(tmp_path, scenario)
    assert (mine.assignment, theirs.assignment) == (b"L", b"F")
    assert mine.protocol_name == "range" and state is GroupState.STABLE


def test_leave_batch(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        results = await stable_group(c, members=3)
        ids = [r.member_id for r in results]
        top, errors = await c.membership.leave(
            "g", [(ids[0], None), (ids[1], None), ("ghost", None)]
        )
        return top, errors, set(c.groups["g"].members), ids

    top, errors, remaining, ids = run(tmp_path, scenario)
    assert top == E.NONE and errors == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID]
    assert remaining == {ids[2]}


# -- static membership (KIP-345) -------------------------------------------------------------


def test_static_member_replacement_without_rebalance(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        a, b = await asyncio.gather(
            join(c, "g", instance="i-a", api_version=5), join(c, "g", instance="i-b")
        )
        leader = a.leader
        plan = {a.member_id: b"A", b.member_id: b"B"}
        await asyncio.gather(
            c.membership.sync(
                "g", 1, a.member_id, "i-a", assignments=plan if leader == a.member_id else None
            ),
            c.membership.sync(
                "g", 1, b.member_id, "i-b", assignments=plan if leader == b.member_id else None
            ),
        )
        # the process behind i-b restarts: it joins with no member id
        again = await join(c, "g", instance="i-b", api_version=5)
        old_heartbeat = await c.membership.heartbeat("g", 1, b.member_id, "i-b")
        new_heartbeat = await c.membership.heartbeat("g", 1, again.member_id, "i-b")
        resync = await c.membership.sync("g", 1, again.member_id, "i-b")
        return leader, b.member_id, again, old_heartbeat, new_heartbeat, resync, c.groups["g"]

    leader, old_id, again, old_hb, new_hb, resync, group = run(tmp_path, scenario)
    assert again.error == E.NONE and again.member_id != old_id
    assert again.generation_id == 1 and group.state is GroupState.STABLE  # no rebalance
    assert again.leader == leader and again.members == ()
    assert old_hb == E.FENCED_INSTANCE_ID and new_hb == E.NONE
    assert resync.error == E.NONE and resync.assignment == b"B"  # keeps its assignment


def test_static_leader_replacement_v9_skips_assignment(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        first = await join(c, "g", instance="i-a", api_version=9)
        await c.membership.sync("g", 1, first.member_id, "i-a", assignments={first.member_id: b"A"})
        again = await join(c, "g", instance="i-a", api_version=9)
        return first, again

    first, again = run(tmp_path, scenario)
    assert again.skip_assignment and again.leader == again.member_id != first.member_id
    assert [m.member_id for m in again.members] == [again.member_id]


def test_static_member_with_new_protocol_triggers_rebalance(tmp_path) -> None:
    sub = subscription("orders")

    async def scenario(c: GroupCoordinator):
        first = await join(c, "g", instance="i-a", protocols=[("range", sub), ("roundrobin", sub)])
        await c.membership.sync("g", 1, first.member_id, "i-a", assignments={first.member_id: b"A"})
        # same protocols, new preference: the protocol of the next generation would change
        again = await join(c, "g", instance="i-a", protocols=[("roundrobin", sub), ("range", sub)])
        return again, c.groups["g"].protocol_name

    again, protocol = run(tmp_path, scenario)
    assert again.generation_id == 2 and protocol == "roundrobin"


def test_static_member_kept_through_rebalance_and_removed_by_instance(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        a, b = await asyncio.gather(
            join(c, "g", instance="i-a", rebalance_ms=200),
            join(c, "g", instance="i-b", rebalance_ms=200),
        )
        leader, other = (a, b) if a.leader == a.member_id else (b, a)
        plan = {a.member_id: b"A", b.member_id: b"B"}
        await asyncio.gather(
            c.membership.sync("g", 1, leader.member_id, assignments=plan),
            c.membership.sync("g", 1, other.member_id),
        )
        # only the leader rejoins: the static follower is kept (not dropped at the timeout)
        rejoin = await join(c, "g", leader.member_id, rebalance_ms=200)
        kept = other.member_id in c.groups["g"].members
        top, errors = await c.membership.leave("g", [("", "i-b" if other is b else "i-a")])
        return rejoin, kept, errors, set(c.groups["g"].members)

    rejoin, kept, errors, remaining = run(tmp_path, scenario)
    assert rejoin.generation_id == 2 and len(rejoin.members) == 2 and kept
    assert errors == [E.NONE] and remaining == {rejoin.member_id}


def test_unknown_static_instance_and_fencing_on_join(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        a = await join(c, "g", instance="i-a")
        wrong_instance = await join(c, "g", a.member_id, instance="i-z")
        fenced = await join(c, "g", "someone-else", instance="i-a")
        return wrong_instance.error, fenced.error

    assert run(tmp_path, scenario) == (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID)


def test_join_unknown_group_with_member_id(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        result = await join(c, "nope", "member-1", protocols=PROTOCOLS)
        return result.error, "nope" in c.groups

    assert run(tmp_path, scenario) == (E.UNKNOWN_MEMBER_ID, False)
