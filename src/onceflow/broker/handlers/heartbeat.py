"""Heartbeat handler.

API: Heartbeat (key 12), versions 0-4.

Behaviour: keeps a member's session alive. REBALANCE_IN_PROGRESS tells a member of a STABLE
generation that a rebalance started (it must rejoin); ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID and
FENCED_INSTANCE_ID (static members, v3+) tell it that it is out.

Versions: v1 throttle_time_ms; v3 group_instance_id; v4 flexible.

Authorization (authorizer on): READ on the group, else GROUP_AUTHORIZATION_FAILED and the
session is not touched, as Kafka.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.heartbeat import HeartbeatResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.heartbeat import HeartbeatRequest
    from onceflow.protocol.messages.sync_group import SyncGroupRequest


def member_identity(
    request: HeartbeatRequest | SyncGroupRequest, version: int
) -> tuple[str, int, str, str | None]:
    """Who a Heartbeat or SyncGroup comes from: group id, generation id, member id and group
    instance id (both APIs carry the instance id from v3)."""
    instance_id = request.group_instance_id if version >= 3 else None
    return request.group_id, request.generation_id, request.member_id, instance_id


async def handle_heartbeat(
    ctx: RequestContext, header: RequestHeader, request: HeartbeatRequest
) -> HeartbeatResponse:
    """Record a member's heartbeat."""
    refused = denied(ctx, ApiKey.HEARTBEAT, "group", request.group_id)
    if refused is not None:
        return HeartbeatResponse(throttle_time_ms=0, error_code=refused)
    error = await ctx.broker.group_coordinator.membership.heartbeat(
        *member_identity(request, header.request_api_version)
    )
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
