"""ListGroups handler.

API: ListGroups (key 16), versions 0-5.

Behaviour: every group of this coordinator (not DEAD), with its protocol type; filtered by
state names (v4+, KIP-518) and group types (v5+, KIP-848: every group here is "classic"), both
case-insensitive, an empty filter matching everything.

Versions: v1 throttle_time_ms; v3 flexible; v4 states_filter and group_state; v5 types_filter
and group_type.

Authorization (authorizer on): with DESCRIBE on the CLUSTER every group is listed; otherwise
only the groups the caller may DESCRIBE, as Kafka.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import allowed_names, denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.list_groups import ListGroupsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.list_groups import ListGroupsRequest

_Listed = ListGroupsResponse.ListedGroup


async def handle_list_groups(
    ctx: RequestContext, header: RequestHeader, request: ListGroupsRequest
) -> ListGroupsResponse:
    """List the groups, filtered."""
    version = header.request_api_version
    error, listings = await ctx.broker.group_coordinator.list_groups(
        list(request.states_filter or ()) if version >= 4 else (),
        list(request.types_filter or ()) if version >= 5 else (),
    )
    if denied(ctx, ApiKey.LIST_GROUPS, "cluster") is not None:
        names = allowed_names(ctx, ApiKey.LIST_GROUPS, "group", [g.group_id for g in listings])
        listings = [g for g in listings if g.group_id in set(names)]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            _Listed(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in listings
        ],
    )
