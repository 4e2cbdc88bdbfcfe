"""JoinGroup: members join a classic group and wait for the rebalance to answer them.

A new dynamic member on v4+ first gets MEMBER_ID_REQUIRED with its member id (KIP-394) and
counts as pending until it rejoins or its session timeout passes. Joining starts a rebalance
(rebalance.py) when the state allows; the request then waits on the member's join future,
which the rebalance completes. A static member (group.instance.id, KIP-345) rejoining with an
unknown member id replaces its old member id; in STABLE, when the protocol chosen for the next
generation would not change, the group record is rewritten and no rebalance happens (the old
id is fenced: FENCED_INSTANCE_ID).

Deviation: on rejoin a member's session and rebalance timeouts are updated (as Kafka's 4.x
classic path does).

The functions take the `Rebalancer` as `rb` (`GroupMembership`, whose methods they are).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from onceflow.coordinator.group.group import GroupMetadata
from onceflow.coordinator.group.member import JoinResult, MemberMetadata
from onceflow.coordinator.group.rebalance import Rebalancer
from onceflow.coordinator.group.state import GroupState
from onceflow.coordinator.group.storage import STORE_GROUP_ERRORS
from onceflow.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from onceflow.coordinator.group.results import PendingWrite

__all__ = ["Protocols", "handle_join_group"]

log = logging.getLogger("onceflow.coordinator.group")

Protocols = Sequence[tuple[str, bytes]]


async def handle_join_group(
    rb: Rebalancer,
    group_id: str,
    member_id: str,
    group_instance_id: str | None,
    protocol_type: str,
    protocols: Protocols,
    session_timeout_ms: int,
    rebalance_timeout_ms: int = -1,
    client_id: str = "",
    client_host: str = "",
    *,
    api_version: int,
) -> JoinResult:
    """Handle a JoinGroup; see the module docstring. `rebalance_timeout_ms` -1 for v0 (the
    session timeout is used); MEMBER_ID_REQUIRED applies from v4, SkipAssignment from v9."""
    store = rb.store
    error = store.check_group_status(group_id)
    if error is not None:
        return JoinResult(error, member_id=member_id)
    config = rb.config
    if not config.min_session_timeout_ms <= session_timeout_ms <= config.max_session_timeout_ms:
        return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
    if rebalance_timeout_ms < 0:  # JoinGroup v0 has none: Kafka uses the session timeout
        rebalance_timeout_ms = session_timeout_ms
    protocols = [(name, bytes(metadata)) for name, metadata in protocols]
    group = store.groups.get(group_id)
    if group is None:
        if member_id:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        group = store.add_group(group_id)
    if not _accept_joining_member(rb, group, member_id):
        member = group.members.get(member_id)
        if member is not None:
            rb.remove_member_and_update_group(group, member, "group.max.size reached")
        return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
    waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
    request = _JoinRequest(
        waiter, group_instance_id, protocol_type, protocols, session_timeout_ms,
        rebalance_timeout_ms, client_id, client_host,
        require_known_member_id=api_version >= 4,
        support_skipping_assignment=api_version >= 9,
    )  # fmt: skip
    if member_id:
        result = _current_member_join(rb, group, member_id, request)
    else:
        result = _new_member_join(rb, group, request)
    if group.is_(GroupState.PREPARING_REBALANCE):
        rb.try_complete_join(group)
    if result is not None:
        return result
    return await waiter


def _accept_joining_member(rb: Rebalancer, group: GroupMetadata, member_id: str) -> bool:
    """Kafka's `acceptJoiningMember` (group.max.size)."""
    max_size = rb.config.max_size
    if group.state in (GroupState.EMPTY, GroupState.DEAD):
        return True
    if group.is_(GroupState.PREPARING_REBALANCE):
        member = group.members.get(member_id)
        awaiting = sum(1 for m in group.members.values() if m.is_awaiting_join)
        return (member is not None and member.is_awaiting_join) or awaiting < max_size
    return group.has(member_id) or len(group.members) < max_size


def _new_member_join(rb: Rebalancer, group: GroupMetadata, req: _JoinRequest) -> JoinResult | None:
    if group.is_(GroupState.DEAD):
        return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
        return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    new_member_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
    instance = req.group_instance_id
    if instance is not None:
        old_member_id = group.current_static_member_id(instance)
        if old_member_id is not None:
            log.info(
                "static member %s of group %s rejoined (%s): replacing member id %s",
                instance, group.group_id, group.state.value, old_member_id,
            )  # fmt: skip
            return _replace_static_member(rb, group, old_member_id, new_member_id, req)
        _add_member_and_rebalance(rb, group, new_member_id, req)
        return None
    if req.require_known_member_id:
        timer = rb.later(req.session_timeout_ms, rb.on_pending_member_expired, group, new_member_id)
        group.pending_members[new_member_id] = timer
        return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id)
    _add_member_and_rebalance(rb, group, new_member_id, req)
    return None


def _current_member_join(
    rb: Rebalancer, group: GroupMetadata, member_id: str, req: _JoinRequest
) -> JoinResult | None:
    def fail(error: ErrorCode) -> JoinResult:
        return JoinResult(error, member_id=member_id)

    if group.is_(GroupState.DEAD):
        return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
        return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if member_id in group.pending_members:
        if req.group_instance_id is not None:  # pending ids are only given to dynamic members
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        _add_member_and_rebalance(rb, group, member_id, req)
        return None
    instance = req.group_instance_id
    if group.is_static_member_fenced(instance, member_id):
        return fail(ErrorCode.FENCED_INSTANCE_ID)
    if not group.has(member_id) or (
        instance is not None and group.current_static_member_id(instance) is None
    ):
        return fail(ErrorCode.UNKNOWN_MEMBER_ID)
    member = group.members[member_id]
    state = group.state
    if state is GroupState.PREPARING_REBALANCE:
        _update_member_and_rebalance(rb, group, member, req, "member rejoined")
        return None
    if state is GroupState.COMPLETING_REBALANCE:
        if member.matches(req.protocols):  # a lost JoinGroup response: answer it again
            return group.join_result_for(member_id, with_members=group.is_leader(member_id))
        _update_member_and_rebalance(rb, group, member, req, "member metadata changed")
        return None
    if state is GroupState.STABLE:
        if group.is_leader(member_id) or not member.matches(req.protocols):
            _update_member_and_rebalance(rb, group, member, req, "leader or metadata change")
            return None
        return group.join_result_for(member_id, with_members=False)
    return fail(ErrorCode.UNKNOWN_MEMBER_ID)  # EMPTY: the member is long gone


def _add_member_and_rebalance(
    rb: Rebalancer, group: GroupMetadata, member_id: str, req: _JoinRequest
) -> None:
    member = MemberMetadata(
        member_id, req.group_instance_id, req.client_id, req.client_host,
        req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
        list(req.protocols), is_new=True,
    )  # fmt: skip
    if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
        group.new_member_added = True
    group.add(member, req.waiter)
    # a new member cannot heartbeat before its JoinGroup is answered: give it longer
    rb.schedule_heartbeat(group, member, rb.config.new_member_join_timeout_ms)
    rb.maybe_prepare_rebalance(group, f"adding member {member_id}")


def _update_member_and_rebalance(
    rb: Rebalancer, group: GroupMetadata, member: MemberMetadata, req: _JoinRequest, reason: str
) -> None:
    group.update_member(member, req.protocols, req.waiter)
    member.session_timeout_ms = req.session_timeout_ms
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    rb.maybe_prepare_rebalance(group, f"{reason}: {member.member_id}")


def _replace_static_member(
    rb: Rebalancer, group: GroupMetadata, old_member_id: str, new_member_id: str, req: _JoinRequest
) -> JoinResult | None:
    """Kafka's `updateStaticMemberAndRebalance`."""
    current_leader = group.leader_id
    instance = req.group_instance_id or ""
    member = group.replace_static_member(instance, old_member_id, new_member_id)
    old_protocols = list(member.protocols)
    rb.schedule_heartbeat(group, member)
    group.update_member(member, req.protocols, req.waiter)
    member.client_id, member.client_host = req.client_id, req.client_host
    member.session_timeout_ms = req.session_timeout_ms
    member.rebalance_timeout_ms = req.rebalance_timeout_ms
    state = group.state
    if state is GroupState.STABLE:
        if group.select_protocol() == group.protocol_name:
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            write = rb.store.write_group(group, assignment)
            rb.store.spawn(
                _finish_static_replace(
                    rb,
                    group,
                    member,
                    instance,
                    old_member_id,
                    old_protocols,
                    current_leader,
                    req.support_skipping_assignment,
                    write,
                )  # fmt: skip
            )
        else:
            rb.maybe_prepare_rebalance(group, f"static member {instance} changed protocol")
    elif state is GroupState.COMPLETING_REBALANCE:
        # the leader may already assign to the old member id: rebalance again
        rb.prepare_rebalance(group, f"static member {instance} rejoined while completing")
    elif state is not GroupState.PREPARING_REBALANCE:
        raise RuntimeError(f"static member {instance} of {group} in state {state.value}")
    return None


async def _finish_static_replace(
    rb: Rebalancer,
    group: GroupMetadata,
    member: MemberMetadata,
    instance: str,
    old_member_id: str,
    old_protocols: list[tuple[str, bytes]],
    current_leader: str | None,
    support_skipping_assignment: bool,
    write: PendingWrite,
) -> None:
    error = await rb.store.await_write(write, STORE_GROUP_ERRORS)
    new_member_id = member.member_id
    if error != ErrorCode.NONE:
        log.warning("group %s: storing static member %s failed: %s",
                       group.group_id, instance, error.name)  # fmt: skip
        waiter, member.join_waiter = member.join_waiter, None
        group.update_member(member, old_protocols, None)
        if group.members.get(new_member_id) is member:
            group.replace_static_member(instance, new_member_id, old_member_id)
            rb.schedule_heartbeat(group, member)
        if waiter is not None and not waiter.done():
            waiter.set_result(
                JoinResult(
                    error,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader=current_leader or "",
                )  # fmt: skip
            )
        return
    if support_skipping_assignment:
        # JoinGroup v9 (KIP-814): the leader learns it leads but skips the assignor
        is_leader = group.is_leader(new_member_id)
        result = group.join_result_for(new_member_id, with_members=is_leader)
        result = replace(result, skip_assignment=is_leader)
    else:
        # before v9: report the old leader id so the new member does not assign
        result = JoinResult(
            ErrorCode.NONE, member_id=new_member_id, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader=current_leader or "",
        )  # fmt: skip
    member.complete_join(result)


@dataclass(slots=True)
class _JoinRequest:
    """The fields of one JoinGroup request the join paths pass around."""

    waiter: asyncio.Future[JoinResult]
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool
    support_skipping_assignment: bool
