"""LeaveGroup handler.

API: LeaveGroup (key 13), versions 0-5.

Behaviour: removes members from a group and starts a rebalance for the rest (an EMPTY group
stays with its offsets). v0-2 name one member by id; from v3 (KIP-345) a batch of members by id
and/or group instance id, each answered separately (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID when
the instance id belongs to another member id) under a top-level error for the group.

Versions: v1 throttle_time_ms; v3 members array; v4 flexible; v5 reason (logged only).

Authorization (authorizer on): READ on the group, else GROUP_AUTHORIZATION_FAILED (no
members answered) and nobody leaves, as Kafka.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.leave_group import LeaveGroupResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.leave_group import LeaveGroupRequest

_MemberResponse = LeaveGroupResponse.MemberResponse


async def handle_leave_group(
    ctx: RequestContext, header: RequestHeader, request: LeaveGroupRequest
) -> LeaveGroupResponse:
    """Remove the named members from the group."""
    version = header.request_api_version
    membership = ctx.broker.group_coordinator.membership
    refused = denied(ctx, ApiKey.LEAVE_GROUP, "group", request.group_id)
    if refused is not None:
        return LeaveGroupResponse(throttle_time_ms=0, error_code=refused, members=[])
    if version < 3:
        top, errors = await membership.leave(request.group_id, [(request.member_id, None)])
        error = top if top != ErrorCode.NONE or not errors else errors[0]
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[])
    identities = [(m.member_id, m.group_instance_id) for m in request.members]
    top, errors = await membership.leave(request.group_id, identities)
    members = []
    if top == ErrorCode.NONE:
        members = [
            _MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=err)
            for (member_id, instance_id), err in zip(identities, errors, strict=True)
        ]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=members)
