"""Table-driven: every group state x every member request -> error code and next state.

Each row brings a group to a state with two members A (leader) and B, then sends one request
as A (in PREPARING_REBALANCE: as B, the member that has not rejoined yet; or as a simple
consumer: generation -1, no member id) and checks the answer and the state the group is in
afterwards. Expected values follow Kafka's classic GroupCoordinator.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from coordinator.group.group_helpers import TP0, join, join_with_id, offsets, run, stable_group
from onceflow.coordinator.group.coordinator import GroupCoordinator
from onceflow.coordinator.group.state import GroupState
from onceflow.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
WAITS = "waits"  # the request is parked until the rebalance moves on


@dataclass
class Ctx:
    """Who is in the group: A leads, B follows; `generation` is the group's current one."""

    a: str
    b: str
    generation: int
    background: list[asyncio.Task]


async def to_state(coordinator: GroupCoordinator, state: GroupState) -> Ctx:
    results = await stable_group(coordinator, "g", members=2, rebalance_ms=2_000)
    leader = results[0].leader
    a = leader
    b = next(r.member_id for r in results if r.member_id != leader)
    ctx = Ctx(a, b, results[0].generation_id, [])
    if state is S.STABLE:
        return ctx
    if state is S.EMPTY:
        await coordinator.membership.leave("g", [(a, None), (b, None)])
        return ctx
    if state is S.DEAD:
        coordinator.groups["g"].transition_to(S.DEAD, 0)  # a group being deleted
        return ctx
    # the leader A rejoins: PREPARING_REBALANCE, waiting for B, who now sends the requests
    ctx.background.append(asyncio.ensure_future(join(coordinator, "g", a, rebalance_ms=2_000)))
    await asyncio.sleep(0.01)
    if state is S.PREPARING_REBALANCE:
        return Ctx(b, a, ctx.generation, ctx.background)
    rejoin = await join(coordinator, "g", b, rebalance_ms=2_000)
    ctx.generation = rejoin.generation_id
    assert state is S.COMPLETING_REBALANCE
    return ctx


async def request(coordinator: GroupCoordinator, ctx: Ctx, kind: str):
    g = ctx.generation
    calls = {
        "heartbeat": lambda: coordinator.membership.heartbeat("g", g, ctx.a, None),
        "heartbeat_stale_gen": lambda: coordinator.membership.heartbeat("g", g - 1, ctx.a, None),
        "heartbeat_unknown": lambda: coordinator.membership.heartbeat("g", g, "nobody", None),
        "sync_follower": lambda: coordinator.membership.sync("g", g, ctx.b),
        "commit": lambda: coordinator.commit_offsets("g", g, ctx.a, None, offsets(p0=1)),
        "commit_stale_gen": lambda: coordinator.commit_offsets(
            "g", g - 1, ctx.a, None, offsets(p0=1)
        ),
        "commit_simple": lambda: coordinator.commit_offsets("g", -1, "", None, offsets(p0=1)),
        "leave": lambda: coordinator.membership.leave("g", [(ctx.a, None)]),
        "join_follower": lambda: join(coordinator, "g", ctx.b, rebalance_ms=2_000),
        "join_new": lambda: join_with_id(coordinator, "g", rebalance_ms=2_000),
    }
    task = asyncio.ensure_future(calls[kind]())
    done, _ = await asyncio.wait([task], timeout=0.1)
    if not done:
        return WAITS
    result = task.result()
    if isinstance(result, dict):  # offset commit: one error per partition
        return result[TP0]
    if isinstance(result, tuple):  # leave: top-level error, member errors
        top, members = result
        return top if top != E.NONE else members[0]
    return getattr(result, "error", result)


ROWS = [
    # EMPTY: A and B left (generation 1 remains)
    (S.EMPTY, "heartbeat", E.UNKNOWN_MEMBER_ID, S.EMPTY),
    (S.EMPTY, "sync_follower", E.UNKNOWN_MEMBER_ID, S.EMPTY),
    (S.EMPTY, "commit", E.UNKNOWN_MEMBER_ID, S.EMPTY),
    (S.EMPTY, "commit_simple", E.NONE, S.EMPTY),
    (S.EMPTY, "leave", E.UNKNOWN_MEMBER_ID, S.EMPTY),
    (S.EMPTY, "join_follower", E.UNKNOWN_MEMBER_ID, S.EMPTY),
    (S.EMPTY, "join_new", E.NONE, S.COMPLETING_REBALANCE),
    # PREPARING_REBALANCE: the leader rejoined, the member sending these has not
    (S.PREPARING_REBALANCE, "heartbeat", E.REBALANCE_IN_PROGRESS, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, "heartbeat_stale_gen", E.ILLEGAL_GENERATION, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, "sync_follower", E.REBALANCE_IN_PROGRESS, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, "commit", E.NONE, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, "commit_simple", E.UNKNOWN_MEMBER_ID, S.PREPARING_REBALANCE),
    (S.PREPARING_REBALANCE, "leave", E.NONE, S.COMPLETING_REBALANCE),  # nobody left to wait for
    (S.PREPARING_REBALANCE, "join_new", WAITS, S.PREPARING_REBALANCE),
    # COMPLETING_REBALANCE: generation 2 handed out, nobody synced yet
    (S.COMPLETING_REBALANCE, "heartbeat", E.NONE, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, "heartbeat_stale_gen", E.ILLEGAL_GENERATION, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, "sync_follower", WAITS, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, "commit", E.REBALANCE_IN_PROGRESS, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, "commit_stale_gen", E.ILLEGAL_GENERATION, S.COMPLETING_REBALANCE),
    (S.COMPLETING_REBALANCE, "leave", E.NONE, S.PREPARING_REBALANCE),
    (S.COMPLETING_REBALANCE, "join_follower", E.NONE, S.COMPLETING_REBALANCE),  # same metadata
    # STABLE
    (S.STABLE, "heartbeat", E.NONE, S.STABLE),
    (S.STABLE, "heartbeat_stale_gen", E.ILLEGAL_GENERATION, S.STABLE),
    (S.STABLE, "heartbeat_unknown", E.UNKNOWN_MEMBER_ID, S.STABLE),
    (S.STABLE, "sync_follower", E.NONE, S.STABLE),
    (S.STABLE, "commit", E.NONE, S.STABLE),
    (S.STABLE, "commit_stale_gen", E.ILLEGAL_GENERATION, S.STABLE),
    (S.STABLE, "commit_simple", E.UNKNOWN_MEMBER_ID, S.STABLE),
    (S.STABLE, "leave", E.NONE, S.PREPARING_REBALANCE),
    (S.STABLE, "join_follower", E.NONE, S.STABLE),  # unchanged follower: no rebalance
    (S.STABLE, "join_new", WAITS, S.PREPARING_REBALANCE),
    # DEAD (being deleted)
    (S.DEAD, "heartbeat", E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    (S.DEAD, "sync_follower", E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    (S.DEAD, "commit", E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    (S.DEAD, "leave", E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
    (S.DEAD, "join_follower", E.COORDINATOR_NOT_AVAILABLE, S.DEAD),
]


@pytest.mark.parametrize(
    "state,kind,expected,next_state", ROWS, ids=[f"{r[0].name}-{r[1]}" for r in ROWS]
)
def test_request_in_state(tmp_path, state, kind, expected, next_state) -> None:
    async def scenario(coordinator: GroupCoordinator):
        ctx = await to_state(coordinator, state)
        assert coordinator.groups["g"].state is state
        answer = await request(coordinator, ctx, kind)
        return answer, coordinator.groups["g"].state

    answer, after = run(tmp_path, scenario)
    assert (answer, after) == (expected, next_state)
