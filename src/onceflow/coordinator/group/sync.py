"""SyncGroup: the leader's assignment is stored and handed to every member.

The leader's assignment is written to `__consumer_offsets`; once durable, the group is STABLE
and every waiting member gets its part. Members that do not sync within the rebalance timeout
are removed and the group rebalances (rebalance.py). In STABLE a SyncGroup is answered at once
with the member's current assignment.

The functions take the `Rebalancer` as `rb` (`GroupMembership`, whose methods they are).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from onceflow.coordinator.group.group import GroupMetadata, validate_current_member
from onceflow.coordinator.group.member import SyncResult
from onceflow.coordinator.group.rebalance import Rebalancer
from onceflow.coordinator.group.state import GroupState
from onceflow.coordinator.group.storage import STORE_GROUP_ERRORS
from onceflow.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from onceflow.coordinator.group.results import PendingWrite

__all__ = ["handle_sync_group"]

log = logging.getLogger("onceflow.coordinator.group")


async def handle_sync_group(
    rb: Rebalancer,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None = None,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    assignments: Mapping[str, bytes] | None = None,
) -> SyncResult:
    """Handle a SyncGroup; see the module docstring. `assignments` (member id -> bytes)
    only from the leader."""
    assignments = assignments or {}
    error = rb.store.check_group_status(group_id)
    if error is not None:
        return SyncResult(error)
    group = rb.store.groups.get(group_id)
    if group is None:
        return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
    if group.is_(GroupState.DEAD):
        return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    error = validate_current_member(group, member_id, group_instance_id)
    if error is None and generation_id != group.generation_id:
        error = ErrorCode.ILLEGAL_GENERATION
    if error is None and protocol_type is not None and protocol_type != group.protocol_type:
        error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    if error is None and protocol_name is not None and protocol_name != group.protocol_name:
        error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    if error is not None:
        return SyncResult(error)
    if group.is_(GroupState.PREPARING_REBALANCE):
        return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
    member = group.members[member_id]
    if group.is_(GroupState.STABLE):
        rb.remove_pending_sync_member(group, member_id)
        rb.schedule_heartbeat(group, member)
        return SyncResult(
            ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
        )
    if not group.is_(GroupState.COMPLETING_REBALANCE):
        return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
    waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
    member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a duplicate request
    member.sync_waiter = waiter
    rb.remove_pending_sync_member(group, member_id)
    if group.is_leader(member_id):
        assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
        write = rb.store.write_group(group, assignment)
        rb.store.spawn(_finish_sync_store(rb, group, group.generation_id, assignment, write))
    return await waiter


async def _finish_sync_store(
    rb: Rebalancer,
    group: GroupMetadata,
    generation_id: int,
    assignment: dict[str, bytes],
    write: PendingWrite,
) -> None:
    error = await rb.store.await_write(write, STORE_GROUP_ERRORS)
    if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation_id:
        return  # the group moved on while the record was written
    if error != ErrorCode.NONE:
        log.warning("group %s: storing the assignment failed: %s",
                       group.group_id, error.name)  # fmt: skip
        rb.reset_and_propagate_assignment_error(group, error)
        rb.maybe_prepare_rebalance(group, "storing the assignment failed")
        return
    for member in group.members.values():
        member.assignment = assignment.get(member.member_id, b"")
        result = SyncResult(
            ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
        )
        if member.complete_sync(result):
            rb.schedule_heartbeat(group, member)
    group.transition_to(GroupState.STABLE, rb.store.now_ms())
