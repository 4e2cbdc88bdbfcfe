"""Loading groups back from __consumer_offsets after a restart."""

from __future__ import annotations

from coordinator.group.group_helpers import TP0, committed, join_with_id, offsets, run, stable_group
from onceflow.coordinator.group.coordinator import GroupCoordinator
from onceflow.coordinator.group.state import GroupState
from onceflow.protocol.errors import ErrorCode

E = ErrorCode


def test_members_rejoin_after_restart_with_next_generation(tmp_path) -> None:
    async def first(c: GroupCoordinator):
        return await stable_group(c, "g", members=2)

    members = run(tmp_path, first)

    async def second(c: GroupCoordinator):
        group = c.groups["g"]
        before = (group.state, group.generation_id, dict(group.members))
        heartbeat = await c.membership.heartbeat("g", 1, members[0].member_id, None)
        rejoined = await join_with_id(c, "g")
        return before, heartbeat, rejoined

    before, heartbeat, rejoined = run(tmp_path, second)
    assert before == (GroupState.EMPTY, 1, {})
    assert heartbeat == E.UNKNOWN_MEMBER_ID
    assert rejoined.error == E.NONE and rejoined.generation_id == 2


def test_deleted_then_recreated_group(tmp_path) -> None:
    async def first(c: GroupCoordinator):
        await stable_group(c, "g")
        await c.membership.leave("g", [(c.groups["g"].leader_id or "", None)])
        await c.commit_offsets("g", -1, "", None, offsets(p0=1))
        assert (await c.delete_groups(["g"])) == {"g": E.NONE}
        await c.commit_offsets("g", -1, "", None, offsets(p0=9))  # a new simple group

    run(tmp_path, first)

    async def second(c: GroupCoordinator):
        group = c.groups["g"]
        return group.generation_id, group.protocol_type, await committed(c, "g", TP0)

    assert run(tmp_path, second) == (0, None, 9)


def test_load_in_progress_and_not_coordinator(tmp_path) -> None:
    import asyncio

    async def main():
        c = GroupCoordinator()
        before = await c.membership.heartbeat("g", 1, "m", None)
        fetch = await c.fetch_offsets("g", [TP0])
        await c.shutdown()
        after = await c.membership.heartbeat("g", 1, "m", None)
        return before, fetch.error, after

    assert asyncio.run(main()) == (
        E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR,
    )  # fmt: skip
