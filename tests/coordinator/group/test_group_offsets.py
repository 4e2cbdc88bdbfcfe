"""Offset commits: validation, persistence in __consumer_offsets, reload, delete, expiry."""

from __future__ import annotations

from coordinator.group.group_helpers import (
    TP0,
    TP1,
    Clock,
    committed,
    config,
    offsets,
    run,
    stable_group,
)
from onceflow.common import TopicPartition
from onceflow.coordinator.group.config import OFFSETS_TOPIC
from onceflow.coordinator.group.coordinator import GroupCoordinator
from onceflow.coordinator.group.offsets import CommittedOffset
from onceflow.coordinator.group.state import GroupState
from onceflow.protocol.errors import ErrorCode

E = ErrorCode
OTHER = TopicPartition("payments", 0)


def test_commit_persists_and_reloads(tmp_path) -> None:
    async def first(c: GroupCoordinator):
        members = await stable_group(c, "g")
        me = members[0]
        result = await c.commit_offsets(
            "g", me.generation_id, me.member_id, None,
            {TP0: CommittedOffset(42, 3, "hello"), TP1: CommittedOffset(7)},
        )  # fmt: skip
        await c.commit_offsets("g", me.generation_id, me.member_id, None, offsets(p0=43))
        simple = await c.commit_offsets("simple", -1, "", None, offsets(p1=9))
        logs = {p: c.storage.logs.get_log(OFFSETS_TOPIC, p).log_end_offset for p in range(3)}
        return result, simple, logs, c.partition_for("g"), c.partition_for("simple")

    result, simple, ends, p_g, p_simple = run(tmp_path, first)
    assert result == {TP0: E.NONE, TP1: E.NONE} and simple == {TP1: E.NONE}
    # records only in the groups' partitions: g has 1 group record + 2 + 1 offset records
    expected = {p: 0 for p in range(3)}
    expected[p_g] += 4
    expected[p_simple] += 1
    assert ends == expected

    async def second(c: GroupCoordinator):
        fetched = await c.fetch_offsets("g", None)
        group = c.groups["g"]
        return fetched, group.state, group.generation_id, group.protocol_type, c.groups["simple"]

    fetched, state, generation, protocol_type, simple_group = run(tmp_path, second)
    assert fetched.partitions[TP0].offset == 43 and fetched.partitions[TP1].offset == 7
    assert fetched.partitions[TP0].metadata == "m43"
    assert (state, generation, protocol_type) == (GroupState.EMPTY, 1, "consumer")
    assert simple_group.offsets.get(TP1).offset == 9


def test_first_commit_keeps_leader_epoch_and_metadata(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await c.commit_offsets(
            "g", -1, "", None, {TP0: CommittedOffset(5, leader_epoch=2, metadata="x")}
        )
        return (await c.fetch_offsets("g", [TP0, TP1])).partitions

    parts = run(tmp_path, scenario)
    assert (parts[TP0].offset, parts[TP0].leader_epoch, parts[TP0].metadata) == (5, 2, "x")
    assert (parts[TP1].offset, parts[TP1].metadata, parts[TP1].error) == (-1, "", E.NONE)


def test_commit_to_unknown_group(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        old = await c.commit_offsets("nope", 3, "m", None, offsets(p0=1), api_version=8)
        new = await c.commit_offsets("nope", 3, "m", None, offsets(p0=1), api_version=9)
        return old[TP0], new[TP0], "nope" in c.groups

    assert run(tmp_path, scenario) == (E.ILLEGAL_GENERATION, E.GROUP_ID_NOT_FOUND, False)


def test_metadata_too_large_is_per_partition(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        result = await c.commit_offsets(
            "g", -1, "", None,
            {TP0: CommittedOffset(1, metadata="x" * 101), TP1: CommittedOffset(2)},
        )  # fmt: skip
        return result, await committed(c, "g", TP1)

    result, tp1 = run(tmp_path, scenario, group_config=config(offset_metadata_max_bytes=100))
    assert result == {TP0: E.OFFSET_METADATA_TOO_LARGE, TP1: E.NONE} and tp1 == 2


def test_fetch_unknown_group_and_invalid_group_id(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        unknown = await c.fetch_offsets("nope", [TP0])
        join_empty = await c.membership.join(
            "", "", None, "consumer", [("range", b"")], 10_000, api_version=5
        )
        return unknown, join_empty.error

    unknown, join_error = run(tmp_path, scenario)
    assert unknown.error == E.NONE and unknown.partitions[TP0].offset == -1
    assert join_error == E.INVALID_GROUP_ID


def test_offset_delete(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await c.commit_offsets("empty", -1, "", None, offsets(p0=1, p1=2))
        empty = await c.delete_offsets("empty", [TP0])
        members = await stable_group(c, "busy")  # subscribed to "orders"
        me = members[0]
        await c.commit_offsets(
            "busy", 1, me.member_id, None, {TP0: CommittedOffset(1), OTHER: CommittedOffset(1)}
        )
        busy = await c.delete_offsets("busy", [TP0, OTHER])
        unknown = await c.delete_offsets("nope", [TP0])
        return empty, busy, unknown, await committed(c, "busy", OTHER)

    empty, busy, unknown, other_after = run(tmp_path, scenario)
    assert empty == (E.NONE, {TP0: E.NONE})
    assert busy == (E.NONE, {TP0: E.GROUP_SUBSCRIBED_TO_TOPIC, OTHER: E.NONE})
    assert unknown == (E.GROUP_ID_NOT_FOUND, {}) and other_after == -1

    async def reloaded(c: GroupCoordinator):
        return await committed(c, "empty", TP0), await committed(c, "empty", TP1)

    assert run(tmp_path, reloaded) == (-1, 2)  # the tombstone survived the restart


def test_describe_list_delete_groups(tmp_path) -> None:
    async def scenario(c: GroupCoordinator):
        await stable_group(c, "busy")
        await c.commit_offsets("idle", -1, "", None, offsets(p0=1))
        described = await c.describe_groups(["busy", "idle", "nope"], api_version=5)
        v6 = await c.describe_groups(["nope"], api_version=6)
        listed = await c.list_groups()
        stable_only = await c.list_groups(states_filter=["stable"])
        consumer_type = await c.list_groups(types_filter=["consumer"])
        deleted = await c.delete_groups(["busy", "idle", "nope"])
        return described, v6, listed, stable_only, consumer_type, deleted, set(c.groups)

    described, v6, listed, stable_only, consumer_type, deleted, left = run(tmp_path, scenario)
    busy, idle, nope = described
    assert (busy.state, busy.protocol, len(busy.members)) == ("Stable", "range", 1)
    assert busy.members[0].assignment.startswith(b"a-")
    assert (idle.state, idle.protocol_type, idle.members) == ("Empty", "", ())
    assert (nope.error, nope.state) == (E.NONE, "Dead") and v6[0].error == E.GROUP_ID_NOT_FOUND
    assert [(g.group_id, g.state) for g in listed[1]] == [("busy", "Stable"), ("idle", "Empty")]
    assert [g.group_id for g in stable_only[1]] == ["busy"] and consumer_type[1] == []
    assert deleted == {"busy": E.NON_EMPTY_GROUP, "idle": E.NONE, "nope": E.GROUP_ID_NOT_FOUND}
    assert left == {"busy"}

    async def reloaded(c: GroupCoordinator):
        return set(c.groups), await committed(c, "idle", TP0)

    assert run(tmp_path, reloaded) == ({"busy"}, -1)


def test_offsets_expire_for_empty_group(tmp_path) -> None:
    clock = Clock()
    retention = 60_000

    async def scenario(c: GroupCoordinator):
        members = await stable_group(c, "g")
        await c.commit_offsets("g", 1, members[0].member_id, None, offsets(p0=5))
        await c.commit_offsets("simple", -1, "", None, offsets(p0=1))
        clock.now += retention  # a Stable group subscribed to the topic keeps its offsets
        kept = await c.expire_offsets()
        await c.membership.leave("g", [(members[0].member_id, None)])  # the group empties now
        clock.now += retention - 1
        before = await c.expire_offsets()
        clock.now += 1
        after = await c.expire_offsets()
        return kept, before, after, set(c.groups)

    kept, before, after, groups = run(
        tmp_path, scenario, group_config=config(offsets_retention_ms=retention), clock=clock
    )
    assert kept == 1  # only the simple group's offset (its commit is old enough)
    assert (before, after) == (0, 1) and groups == set()

    async def reloaded(c: GroupCoordinator):
        return set(c.groups)

    assert run(tmp_path, reloaded) == set()  # tombstones for offsets and groups were written
