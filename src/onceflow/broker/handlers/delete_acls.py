"""DeleteAcls handler.

API: DeleteAcls (key 31), versions 1-3.

Behaviour: needs ALTER on the CLUSTER, else every filter is CLUSTER_AUTHORIZATION_FAILED. Each
filter deletes the ACLs it matches (`AclAuthorizer.prepare_delete_acls`; each filter lists
every ACL it matched in the set as it was before the request); a filter with an UNKNOWN field
is INVALID_REQUEST. The new set is stored durably (fsync, in a worker thread) before it takes
effect; when it cannot be stored, every filter is UNKNOWN_SERVER_ERROR and nothing changes.
With no authorizer configured: SECURITY_DISABLED, as in Kafka.

Versions: v1 pattern types (KIP-290); v2 flexible; v3 same as v2.

Deviations: none known.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from onceflow.broker.acl_wire import change_acls, filter_from_wire
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_acls import DeleteAclsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.delete_acls import DeleteAclsRequest
    from onceflow.security.acl import AclBinding
    from onceflow.security.authorizer import AclDeleteResult

log = logging.getLogger("onceflow.broker.delete_acls")

_Result = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = _Result.DeleteAclsMatchingAcl


def _all(request: DeleteAclsRequest, error: ErrorCode, message: str | None) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            _Result(error_code=error, error_message=message, matching_acls=[])
            for _ in request.filters
        ],
    )


def _matching(binding: AclBinding) -> _Matching:
    pattern, entry = binding.pattern, binding.entry
    return _Matching(
        error_code=ErrorCode.NONE,
        error_message=None,
        resource_type=pattern.resource_type,
        resource_name=pattern.name,
        pattern_type=pattern.pattern_type,
        principal=entry.principal,
        host=entry.host,
        operation=entry.operation,
        permission_type=entry.permission_type,
    )


async def handle_delete_acls(
    ctx: RequestContext, header: RequestHeader, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    """Delete the ACLs each filter matches, durably."""
    filters = [filter_from_wire(f) for f in request.filters]

    def answer(results: list[AclDeleteResult]) -> DeleteAclsResponse:
        deleted = sum(len(r.deleted) for r in results)
        log.info("DeleteAcls from %s (%s): %d ACL(s) deleted", ctx.peer, ctx.principal, deleted)
        return DeleteAclsResponse(
            throttle_time_ms=0,
            filter_results=[
                _Result(
                    error_code=r.error_code,
                    error_message=r.error_message,
                    matching_acls=[_matching(b) for b in r.deleted],
                )
                for r in results
            ],
        )

    return await change_acls(
        ctx,
        ApiKey.DELETE_ACLS,
        lambda authorizer: authorizer.prepare_delete_acls(filters),
        answer,
        lambda error, message: _all(request, error, message),
    )
