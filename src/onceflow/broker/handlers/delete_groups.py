"""DeleteGroups handler.

API: DeleteGroups (key 42), versions 0-2.

Behaviour: deletes each EMPTY group with its committed offsets (offset and group tombstones are
written to `__consumer_offsets` and flushed before the answer). GROUP_ID_NOT_FOUND for an
unknown group, NON_EMPTY_GROUP for a group with members; a name listed twice is answered once.

Versions: v1 same as v0; v2 flexible.

Authorization (authorizer on): DELETE on each group, else GROUP_AUTHORIZATION_FAILED for it
and it is kept (the others are deleted), as Kafka.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_names
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_groups import DeleteGroupsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.delete_groups import DeleteGroupsRequest

_Result = DeleteGroupsResponse.DeletableGroupResult


async def handle_delete_groups(
    ctx: RequestContext, header: RequestHeader, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    """Delete the named groups."""
    names = list(dict.fromkeys(request.groups_names))
    refused = denied_names(ctx, ApiKey.DELETE_GROUPS, "group", names)
    results = dict.fromkeys(refused, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    results.update(
        await ctx.broker.group_coordinator.delete_groups([n for n in names if n not in refused])
    )
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[_Result(group_id=name, error_code=results[name]) for name in names],
    )
