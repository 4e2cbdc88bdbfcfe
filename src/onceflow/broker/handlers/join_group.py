"""JoinGroup handler.

API: JoinGroup (key 11), versions 0-9.

Behaviour: hands the member's protocols to the group coordinator's `join`, which answers once
the rebalance completes (every known member rejoined, or the rebalance timeout passed) — the
request stays parked meanwhile, so other requests on the connection keep flowing (pipelining).
The leader gets every member's metadata. An empty group id is INVALID_GROUP_ID; a protocol type
or protocol list that does not match the group's is INCONSISTENT_GROUP_PROTOCOL; a session
timeout outside `group.min.session.timeout.ms`..`group.max.session.timeout.ms` is
INVALID_SESSION_TIMEOUT.

Versions: v0 has no rebalance timeout (the session timeout is used); v1 rebalance_timeout_ms;
v2 throttle_time_ms; v4 MEMBER_ID_REQUIRED (KIP-394: a new member gets its id first and joins
again); v5 group_instance_id (static membership, KIP-345); v6 flexible; v7 protocol_type in the
response; v8 reason (logged only); v9 skip_assignment (KIP-814).

Authorization (authorizer on): READ on the group, else GROUP_AUTHORIZATION_FAILED and the
group is not touched, as Kafka.

Deviations: client_host is the peer address as `/host` (Kafka's form), without reverse lookup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.join_group import JoinGroupResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.join_group import JoinGroupRequest

_Member = JoinGroupResponse.JoinGroupResponseMember


def client_host(ctx: RequestContext) -> str:
    """Kafka's `clientHost` for a connection: `/` and the peer's address."""
    return "/" + ctx.client_host


async def handle_join_group(
    ctx: RequestContext, header: RequestHeader, request: JoinGroupRequest
) -> JoinGroupResponse:
    """Join (or rejoin) a group and wait for the rebalance to complete."""
    version = header.request_api_version
    refused = denied(ctx, ApiKey.JOIN_GROUP, "group", request.group_id)
    if refused is not None:
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=refused,
            generation_id=-1,
            protocol_type=None,
            protocol_name=None if version >= 7 else "",
            leader="",
            member_id="",
            members=[],
        )
    result = await ctx.broker.group_coordinator.membership.join(
        request.group_id,
        request.member_id,
        request.group_instance_id if version >= 5 else None,
        request.protocol_type,
        [(p.name, bytes(p.metadata)) for p in request.protocols],
        request.session_timeout_ms,
        request.rebalance_timeout_ms if version >= 1 else -1,
        header.client_id or "",
        client_host(ctx),
        api_version=version,
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # nullable only from v7
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            _Member(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )
