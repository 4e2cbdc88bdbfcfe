"""Group membership APIs through the broker's handlers, in-process and through the wire
encoding of every advertised version: JoinGroup (MEMBER_ID_REQUIRED from v4, static members
from v5), SyncGroup, Heartbeat, LeaveGroup (single member v0-2, batch v3+), DescribeGroups,
ListGroups (state/type filters), DeleteGroups, and the versions ApiVersions advertises."""

from __future__ import annotations

import asyncio
import struct

import pytest

from broker.broker_helpers import call, open_state
from onceflow.broker import dispatch
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_groups import DeleteGroupsRequest
from onceflow.protocol.messages.describe_groups import DescribeGroupsRequest
from onceflow.protocol.messages.heartbeat import HeartbeatRequest
from onceflow.protocol.messages.join_group import JoinGroupRequest
from onceflow.protocol.messages.leave_group import LeaveGroupRequest
from onceflow.protocol.messages.list_groups import ListGroupsRequest
from onceflow.protocol.messages.sync_group import SyncGroupRequest

GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 100,
    "offsets.topic.num.partitions": 3,
}

# What each group API advertises; the interop tests show real clients negotiate within these.
ADVERTISED = {
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
}


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, topic array, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        data = topic.encode()
        out += struct.pack(">h", len(data)) + data
    return out + struct.pack(">i", -1)


def run_with_state(tmp_path, scenario, name: str = "data", **overrides):
    """Open a BrokerState with the group settings, load its coordinators on the loop, run
    `scenario(state)` (bounded), close the state in the same loop."""

    async def main():
        state = open_state(tmp_path / name, **{**GROUP_SETTINGS, **overrides})
        state.load_coordinators()
        try:
            return await asyncio.wait_for(scenario(state), 30)
        finally:
            await state.close()

    return asyncio.run(main())


def join_request(version, group, member_id="", instance_id=None, topics=("t",), session=10000):
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session,
        rebalance_timeout_ms=10000,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription(*topics))
        ],
    )
    return request


async def join(state, version, group, member_id="", instance_id=None, **kwargs):
    """JoinGroup at `version`, rejoining once with the given id after MEMBER_ID_REQUIRED."""
    request = join_request(version, group, member_id, instance_id, **kwargs)
    response = await call(state, ApiKey.JOIN_GROUP, version, request)
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        request = join_request(version, group, response.member_id, instance_id, **kwargs)
        response = await call(state, ApiKey.JOIN_GROUP, version, request)
    return response


async def sync(state, version, group, generation, member_id, assignments=(), instance_id=None):
    request = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in assignments
        ],
    )
    return await call(state, ApiKey.SYNC_GROUP, version, request)


async def stable_member(state, group, *, join_version=9, sync_version=5, instance_id=None):
    """A single-member STABLE group: (member id, generation)."""
    joined = await join(state, join_version, group, instance_id=instance_id)
    assert joined.error_code == ErrorCode.NONE
    synced = await sync(
        state,
        sync_version,
        group,
        joined.generation_id,
        joined.member_id,
        [(joined.member_id, b"assignment-1")],
        instance_id,
    )
    assert synced.error_code == ErrorCode.NONE
    assert synced.assignment == b"assignment-1"
    return joined.member_id, joined.generation_id


async def heartbeat(state, version, group, generation, member_id, instance_id=None):
    request = HeartbeatRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
    )
    return (await call(state, ApiKey.HEARTBEAT, version, request)).error_code


def test_api_versions_advertise_the_group_apis():
    for key, (low, high) in ADVERTISED.items():
        api = dispatch.lookup(key, high)
        assert api is not None, key.name
        assert (api.min_version, api.max_version) == (low, high), key.name
        assert dispatch.lookup(key, high + 1) is None


@pytest.mark.parametrize("version", range(0, 10))
def test_join_group_every_version_makes_a_leader_with_metadata(tmp_path, version):
    async def scenario(state):
        response = await call(state, ApiKey.JOIN_GROUP, version, join_request(version, "g"))
        if version >= 4:
            # KIP-394: a new member first gets its id, then joins with it
            assert response.error_code == ErrorCode.MEMBER_ID_REQUIRED
            assert response.member_id.startswith("test-")
            response = await call(
                state, ApiKey.JOIN_GROUP, version, join_request(version, "g", response.member_id)
            )
        assert response.error_code == ErrorCode.NONE
        assert response.generation_id == 1
        assert response.leader == response.member_id
        assert response.protocol_name == "range"
        if version >= 7:
            assert response.protocol_type == "consumer"
        assert [m.member_id for m in response.members] == [response.member_id]
        assert response.members[0].metadata == subscription("t")

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize("version", range(0, 6))
def test_sync_group_every_version_delivers_the_leaders_assignment(tmp_path, version):
    async def scenario(state):
        joined = await join(state, 5, "g")
        synced = await sync(
            state,
            version,
            "g",
            joined.generation_id,
            joined.member_id,
            [(joined.member_id, b"mine")],
        )
        assert synced.error_code == ErrorCode.NONE
        assert synced.assignment == b"mine"
        if version >= 5:
            assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
        stale = await sync(state, version, "g", joined.generation_id + 1, joined.member_id)
        assert stale.error_code == ErrorCode.ILLEGAL_GENERATION

    run_with_state(tmp_path, scenario)


def test_sync_group_v5_checks_the_protocol(tmp_path):
    async def scenario(state):
        joined = await join(state, 9, "g")
        request = SyncGroupRequest(
            group_id="g",
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            protocol_type="consumer",
            protocol_name="roundrobin",
            assignments=[],
        )
        response = await call(state, ApiKey.SYNC_GROUP, 5, request)
        assert response.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize("version", range(0, 5))
def test_heartbeat_every_version(tmp_path, version):
    async def scenario(state):
        member, generation = await stable_member(state, "g")
        assert await heartbeat(state, version, "g", generation, member) == ErrorCode.NONE
        assert (
            await heartbeat(state, version, "g", generation + 1, member)
            == ErrorCode.ILLEGAL_GENERATION
        )
        assert (
            await heartbeat(state, version, "g", generation, "nobody")
            == ErrorCode.UNKNOWN_MEMBER_ID
        )
        # a second member joining moves the group to PreparingRebalance: the first is told
        second = asyncio.ensure_future(join(state, 9, "g"))
        await asyncio.sleep(0.05)
        assert (
            await heartbeat(state, version, "g", generation, member)
            == ErrorCode.REBALANCE_IN_PROGRESS
        )
        rejoined = await join(state, 9, "g", member)
        assert rejoined.error_code == ErrorCode.NONE
        assert (await second).error_code == ErrorCode.NONE

    run_with_state(tmp_path, scenario)


def test_heartbeat_fences_an_old_static_member(tmp_path):
    async def scenario(state):
        member, generation = await stable_member(state, "g", instance_id="app-1")
        # the same instance restarts: a new member id replaces the old one, no rebalance
        rejoined = await join(state, 9, "g", instance_id="app-1")
        assert rejoined.error_code == ErrorCode.NONE
        assert rejoined.member_id != member
        assert rejoined.generation_id == generation
        assert (
            await heartbeat(state, 3, "g", generation, member, "app-1")
            == ErrorCode.FENCED_INSTANCE_ID
        )
        assert (
            await heartbeat(state, 3, "g", generation, rejoined.member_id, "app-1")
            == ErrorCode.NONE
        )

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize("version", range(0, 6))
def test_leave_group_every_version(tmp_path, version):
    async def scenario(state):
        member, _ = await stable_member(state, "g")
        if version < 3:
            request = LeaveGroupRequest(group_id="g", member_id=member)
            unknown = LeaveGroupRequest(group_id="g", member_id="nobody")
        else:
            identity = LeaveGroupRequest.MemberIdentity
            request = LeaveGroupRequest(
                group_id="g", members=[identity(member_id=member, group_instance_id=None)]
            )
            unknown = LeaveGroupRequest(
                group_id="g", members=[identity(member_id="nobody", group_instance_id=None)]
            )
        response = await call(state, ApiKey.LEAVE_GROUP, version, request)
        assert response.error_code == ErrorCode.NONE
        if version >= 3:
            assert [(m.member_id, m.error_code) for m in response.members] == [
                (member, ErrorCode.NONE)
            ]
        response = await call(state, ApiKey.LEAVE_GROUP, version, unknown)
        if version < 3:
            assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        else:
            assert response.error_code == ErrorCode.NONE
            assert response.members[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
        _, groups = await state.group_coordinator.list_groups()
        assert [(g.group_id, g.state) for g in groups] == [("g", "Empty")]

    run_with_state(tmp_path, scenario)


def test_leave_group_v3_by_instance_id(tmp_path):
    async def scenario(state):
        await stable_member(state, "g", instance_id="app-1")
        identity = LeaveGroupRequest.MemberIdentity
        request = LeaveGroupRequest(
            group_id="g", members=[identity(member_id="", group_instance_id="app-1")]
        )
        response = await call(state, ApiKey.LEAVE_GROUP, 4, request)
        assert response.members[0].error_code == ErrorCode.NONE
        assert response.members[0].group_instance_id == "app-1"
        described = await call(
            state, ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"])
        )
        assert described.groups[0].members == []

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize("version", range(0, 7))
def test_describe_groups_every_version(tmp_path, version):
    async def scenario(state):
        member, _ = await stable_member(state, "g", instance_id="app-1")
        request = DescribeGroupsRequest(groups=["g", "missing"])
        response = await call(state, ApiKey.DESCRIBE_GROUPS, version, request)
        found, missing = response.groups
        assert (found.group_id, found.error_code, found.group_state) == ("g", 0, "Stable")
        assert (found.protocol_type, found.protocol_data) == ("consumer", "range")
        (described,) = found.members
        assert described.member_id == member
        assert described.client_id == "test"
        assert described.client_host == "/test-peer"
        assert described.member_metadata == subscription("t")
        assert described.member_assignment == b"assignment-1"
        if version >= 4:
            assert described.group_instance_id == "app-1"
        assert missing.group_state == "Dead"
        expected = ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else ErrorCode.NONE
        assert missing.error_code == expected

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize("version", range(0, 6))
def test_list_groups_every_version(tmp_path, version):
    async def scenario(state):
        await stable_member(state, "stable")
        await join(state, 9, "rebalancing")  # leader joined, never synced: CompletingRebalance
        response = await call(state, ApiKey.LIST_GROUPS, version, ListGroupsRequest())
        assert response.error_code == ErrorCode.NONE
        listed = sorted((g.group_id, g.protocol_type) for g in response.groups)
        assert listed == [("rebalancing", "consumer"), ("stable", "consumer")]
        if version >= 4:
            request = ListGroupsRequest(states_filter=["stable"])
            response = await call(state, ApiKey.LIST_GROUPS, version, request)
            assert [(g.group_id, g.group_state) for g in response.groups] == [("stable", "Stable")]
        if version >= 5:
            assert {g.group_type for g in response.groups} == {"classic"}
            request = ListGroupsRequest(types_filter=["consumer"])
            response = await call(state, ApiKey.LIST_GROUPS, version, request)
            assert response.groups == []

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_groups_every_version(tmp_path, version):
    async def scenario(state):
        member, _ = await stable_member(state, "busy")
        await stable_member(state, "idle")
        leave = LeaveGroupRequest(group_id="idle", members=[])
        idle = state.group_coordinator.groups["idle"]
        leave.members = [
            LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=None)
            for m in idle.members
        ]
        await call(state, ApiKey.LEAVE_GROUP, 5, leave)
        request = DeleteGroupsRequest(groups_names=["busy", "idle", "missing", "idle"])
        response = await call(state, ApiKey.DELETE_GROUPS, version, request)
        assert {r.group_id: r.error_code for r in response.results} == {
            "busy": ErrorCode.NON_EMPTY_GROUP,
            "idle": ErrorCode.NONE,
            "missing": ErrorCode.GROUP_ID_NOT_FOUND,
        }
        assert len(response.results) == 3
        listed = await call(state, ApiKey.LIST_GROUPS, 0, ListGroupsRequest())
        assert [g.group_id for g in listed.groups] == ["busy"]
        assert member in state.group_coordinator.groups["busy"].members

    run_with_state(tmp_path, scenario)


def test_metrics_show_groups_by_state_and_members(tmp_path):
    async def scenario(state):
        await stable_member(state, "stable")
        await join(state, 9, "rebalancing")
        return state.metrics.render(state)

    lines = run_with_state(tmp_path, scenario).splitlines()
    assert 'onceflow_consumer_groups{state="Stable"} 1' in lines
    assert 'onceflow_consumer_groups{state="CompletingRebalance"} 1' in lines
    assert 'onceflow_consumer_group_members{group="stable"} 1' in lines
    assert 'onceflow_consumer_group_members{group="rebalancing"} 1' in lines
