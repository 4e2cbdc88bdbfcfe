"""SyncGroup handler.

API: SyncGroup (key 14), versions 0-5.

Behaviour: after a rebalance every member sends SyncGroup; the leader's carries the
assignment. The coordinator's `sync` stores the group record (with the assignment) in
`__consumer_offsets`, waits for it to be durable and answers every waiting member with its
share. A stale generation is ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, a sync
during a new rebalance REBALANCE_IN_PROGRESS.

Versions: v1 throttle_time_ms; v3 group_instance_id; v4 flexible; v5 protocol_type and
protocol_name in request and response (checked against the group's: INCONSISTENT_GROUP_PROTOCOL).

Authorization (authorizer on): READ on the group, else GROUP_AUTHORIZATION_FAILED and the
group is not touched, as Kafka.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.broker.handlers.heartbeat import member_identity
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.sync_group import SyncGroupResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.sync_group import SyncGroupRequest


async def handle_sync_group(
    ctx: RequestContext, header: RequestHeader, request: SyncGroupRequest
) -> SyncGroupResponse:
    """Deliver (leader) or receive (every member) the assignment of the current generation."""
    version = header.request_api_version
    refused = denied(ctx, ApiKey.SYNC_GROUP, "group", request.group_id)
    if refused is not None:
        return SyncGroupResponse(throttle_time_ms=0, error_code=refused, assignment=b"")
    result = await ctx.broker.group_coordinator.membership.sync(
        *member_identity(request, version),
        request.protocol_type if version >= 5 else None,
        request.protocol_name if version >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
