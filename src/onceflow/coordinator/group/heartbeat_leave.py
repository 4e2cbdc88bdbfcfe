"""Heartbeat and LeaveGroup: a member proves it is alive, or leaves.

Heartbeat restarts the member's session timer and answers REBALANCE_IN_PROGRESS while the group
prepares a rebalance. LeaveGroup (v3+: a batch; an empty member id names a static member by
its group.instance.id) removes members, which rebalances the group (rebalance.py).

The functions take the `Rebalancer` as `rb` (`GroupMembership`, whose methods they are).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from onceflow.coordinator.group.group import validate_current_member
from onceflow.coordinator.group.rebalance import Rebalancer
from onceflow.coordinator.group.state import GroupState
from onceflow.protocol.errors import ErrorCode

__all__ = ["handle_heartbeat", "handle_leave_group"]

log = logging.getLogger("onceflow.coordinator.group")


async def handle_heartbeat(
    rb: Rebalancer, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
) -> ErrorCode:
    """Handle a Heartbeat; see the module docstring."""
    error = rb.store.check_group_status(group_id)
    if error is not None:
        return error
    group = rb.store.groups.get(group_id)
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    error = validate_current_member(group, member_id, group_instance_id)
    if error is not None:
        return error
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    if group.is_(GroupState.EMPTY):
        return ErrorCode.UNKNOWN_MEMBER_ID
    rb.schedule_heartbeat(group, group.members[member_id])
    if group.is_(GroupState.PREPARING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


async def handle_leave_group(
    rb: Rebalancer, group_id: str, members: Sequence[tuple[str, str | None]]
) -> tuple[ErrorCode, list[ErrorCode]]:
    """Handle a LeaveGroup: `(member_id, group_instance_id)` per leaving member (v3+ batch;
    an empty member id removes the static member by instance id). Returns the top-level
    error and one error per member."""
    error = rb.store.check_group_status(group_id)
    if error is not None:
        return error, []
    group = rb.store.groups.get(group_id)
    if group is None:
        return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    errors = []
    for member_id, instance in members:
        if not member_id:
            current = group.current_static_member_id(instance)
            if current is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            member_id = current
        elif group.remove_pending_member(member_id):
            if group.is_(GroupState.PREPARING_REBALANCE):
                rb.try_complete_join(group)
            errors.append(ErrorCode.NONE)
            continue
        else:
            error = validate_current_member(group, member_id, instance)
            if error is not None:
                errors.append(error)
                continue
        log.info("member %s is leaving group %s", member_id, group_id)
        rb.remove_member_and_update_group(group, group.members[member_id], "member left the group")
        errors.append(ErrorCode.NONE)
    return ErrorCode.NONE, errors
