"""Authorization of the group APIs (issue 10): JoinGroup/SyncGroup/Heartbeat/LeaveGroup need
READ on the group, OffsetFetch and DescribeGroups DESCRIBE, DeleteGroups and OffsetDelete
DELETE; ListGroups filters. A denied request gets Kafka's error and the group, its members and
its offsets are as they were."""

from __future__ import annotations

import asyncio

from broker.authz_helpers import (
    ALICE,
    ANONYMOUS_ADMIN,
    MALLORY,
    creation,
    grant_async,
    open_authz_state,
)
from broker.broker_helpers import call
from broker.test_broker_group_membership import (
    GROUP_SETTINGS,
    heartbeat,
    join_request,
    stable_member,
)
from broker.test_broker_group_offsets import commit_request, fetch, fetch_request
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_groups import DeleteGroupsRequest
from onceflow.protocol.messages.describe_groups import DescribeGroupsRequest
from onceflow.protocol.messages.heartbeat import HeartbeatRequest
from onceflow.protocol.messages.leave_group import LeaveGroupRequest
from onceflow.protocol.messages.list_groups import ListGroupsRequest
from onceflow.protocol.messages.offset_delete import OffsetDeleteRequest
from onceflow.protocol.messages.sync_group import SyncGroupRequest
from onceflow.security.acl import AclOperation, ResourceType

_Op = AclOperation
_R = ResourceType
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def run_authz(tmp_path, scenario):
    """`scenario(state)` on a broker with the authorizer on, topics t and secret."""

    async def main():
        state = open_authz_state(tmp_path / "data", **GROUP_SETTINGS, **ANONYMOUS_ADMIN)
        state.load_coordinators()
        for name in ("t", "secret"):
            assert state.logs.create_topic(name, 1).error == ErrorCode.NONE
        try:
            return await asyncio.wait_for(scenario(state), 30)
        finally:
            await state.close()

    asyncio.run(main())


async def describe(state, groups, principal="User:ANONYMOUS"):
    request = DescribeGroupsRequest(groups=list(groups), include_authorized_operations=False)
    response = await call(state, ApiKey.DESCRIBE_GROUPS, 5, request, principal=principal)
    return {g.group_id: (g.error_code, g.group_state, len(g.members)) for g in response.groups}


async def commit(state, group, offsets):
    response = await call(state, ApiKey.OFFSET_COMMIT, 8, commit_request(group, offsets))
    assert all(p.error_code == 0 for t in response.topics for p in t.partitions)


def test_membership_apis_need_read_on_the_group(tmp_path):
    async def scenario(state):
        member, generation = await stable_member(state, "g")
        before = await describe(state, ["g"])
        as_mallory = {"principal": MALLORY}
        join = await call(state, ApiKey.JOIN_GROUP, 9, join_request(9, "g"), **as_mallory)
        assert join.error_code == GROUP_DENIED
        sync = SyncGroupRequest(
            group_id="g", generation_id=generation, member_id=member, assignments=[]
        )
        response = await call(state, ApiKey.SYNC_GROUP, 5, sync, **as_mallory)
        assert response.error_code == GROUP_DENIED
        beat = HeartbeatRequest(group_id="g", generation_id=generation, member_id=member)
        response = await call(state, ApiKey.HEARTBEAT, 4, beat, **as_mallory)
        assert response.error_code == GROUP_DENIED
        leave = LeaveGroupRequest(
            group_id="g", members=[LeaveGroupRequest.MemberIdentity(member_id=member)]
        )
        response = await call(state, ApiKey.LEAVE_GROUP, 5, leave, **as_mallory)
        assert (response.error_code, response.members) == (GROUP_DENIED, [])
        # nothing changed: same generation, the member is still in and may heartbeat
        assert await describe(state, ["g"]) == before == {"g": (0, "Stable", 1)}
        assert await heartbeat(state, 4, "g", generation, member) == ErrorCode.NONE
        # READ on the group is enough
        await grant_async(state, creation(_R.GROUP, "g", _Op.READ))
        response = await call(state, ApiKey.HEARTBEAT, 4, beat, principal=ALICE)
        assert response.error_code == ErrorCode.NONE
        response = await call(state, ApiKey.LEAVE_GROUP, 5, leave, principal=ALICE)
        assert (response.error_code, response.members[0].error_code) == (0, 0)
        assert await describe(state, ["g"]) == {"g": (0, "Empty", 0)}

    run_authz(tmp_path, scenario)


def test_offset_fetch_needs_describe_on_group_and_topics(tmp_path):
    async def scenario(state):
        await commit(state, "g", {("t", 0): (5, ""), ("secret", 0): (7, "")})
        await grant_async(
            state, creation(_R.GROUP, "g", _Op.DESCRIBE), creation(_R.TOPIC, "t", _Op.READ)
        )
        wanted = {"t": [0], "secret": [0]}
        for version in (5, 8):
            request = fetch_request(version, "g", wanted)
            response = await call(state, ApiKey.OFFSET_FETCH, version, request, principal=ALICE)
            topics = response.groups[0].topics if version >= 8 else response.topics
            answered = {
                (t.name, p.committed_offset, p.error_code) for t in topics for p in t.partitions
            }
            assert answered == {("t", 5, 0), ("secret", -1, TOPIC_DENIED)}
            # all topics: the undescribable one is left out
            request = fetch_request(version, "g", None)
            response = await call(state, ApiKey.OFFSET_FETCH, version, request, principal=ALICE)
            topics = response.groups[0].topics if version >= 8 else response.topics
            assert [(t.name, t.partitions[0].committed_offset) for t in topics] == [("t", 5)]
        # no DESCRIBE on the group: the group error (v1 repeats it per partition)
        for version, error_of in (
            (8, lambda r: r.groups[0].error_code),
            (5, lambda r: r.error_code),
            (1, lambda r: r.topics[0].partitions[0].error_code),
        ):
            request = fetch_request(version, "g", {"t": [0]})
            response = await call(state, ApiKey.OFFSET_FETCH, version, request, principal=MALLORY)
            assert error_of(response) == GROUP_DENIED
        assert (await fetch(state, 9, "g", None))[1] == {
            ("t", 0): (5, "", 0),
            ("secret", 0): (7, "", 0),
        }

    run_authz(tmp_path, scenario)


def test_describe_groups_and_list_groups(tmp_path):
    async def scenario(state):
        await stable_member(state, "g")
        await commit(state, "h", {("t", 0): (1, "")})
        await grant_async(state, creation(_R.GROUP, "g", _Op.DESCRIBE))
        assert await describe(state, ["g", "h"], ALICE) == {
            "g": (0, "Stable", 1),
            "h": (GROUP_DENIED, "", 0),
        }

        async def listed(principal):
            response = await call(
                state, ApiKey.LIST_GROUPS, 4, ListGroupsRequest(), principal=principal
            )
            assert response.error_code == ErrorCode.NONE
            return [g.group_id for g in response.groups]

        assert await listed(MALLORY) == []
        assert await listed(ALICE) == ["g"]
        await grant_async(state, creation(_R.CLUSTER, "kafka-cluster", _Op.DESCRIBE))
        assert await listed(ALICE) == ["g", "h"]

    run_authz(tmp_path, scenario)


def test_delete_groups_and_offset_delete_need_delete_on_the_group(tmp_path):
    async def scenario(state):
        offsets = {("t", 0): (1, ""), ("secret", 0): (2, "")}
        await commit(state, "e", offsets)
        await commit(state, "f", offsets)
        await grant_async(
            state, creation(_R.GROUP, "e", _Op.DELETE), creation(_R.TOPIC, "t", _Op.READ)
        )
        request = DeleteGroupsRequest(groups_names=["e", "f"])
        response = await call(state, ApiKey.DELETE_GROUPS, 2, request, principal=ALICE)
        assert {r.group_id: r.error_code for r in response.results} == {"e": 0, "f": GROUP_DENIED}
        assert await describe(state, ["f"]) == {"f": (0, "Empty", 0)}
        kept = {("t", 0): (1, "", 0), ("secret", 0): (2, "", 0)}
        assert (await fetch(state, 9, "f", None))[1] == kept

        topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
        part = topic.OffsetDeleteRequestPartition
        request = OffsetDeleteRequest(
            group_id="f",
            topics=[topic(name=n, partitions=[part(partition_index=0)]) for n in ("t", "secret")],
        )
        response = await call(state, ApiKey.OFFSET_DELETE, 0, request, principal=ALICE)
        assert (response.error_code, response.topics) == (GROUP_DENIED, [])
        assert (await fetch(state, 9, "f", None))[1] == kept
        await grant_async(state, creation(_R.GROUP, "f", _Op.DELETE))
        response = await call(state, ApiKey.OFFSET_DELETE, 0, request, principal=ALICE)
        assert response.error_code == ErrorCode.NONE
        errors = {t.name: t.partitions[0].error_code for t in response.topics}
        assert errors == {"t": 0, "secret": TOPIC_DENIED}
        assert (await fetch(state, 9, "f", None))[1] == {("secret", 0): (2, "", 0)}

    run_authz(tmp_path, scenario)
