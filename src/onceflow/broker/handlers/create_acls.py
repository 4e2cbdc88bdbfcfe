"""CreateAcls handler.

API: CreateAcls (key 30), versions 1-3.

Behaviour: needs ALTER on the CLUSTER (`broker.authorization.RULES`), else every entry is
CLUSTER_AUTHORIZATION_FAILED. Each entry is validated as Kafka's controller does
(`security.acl.new_binding_error`: INVALID_REQUEST with Kafka's message for that entry only);
the valid ones are added to the ACL set, which is stored durably (`security.acl_store`: fsync
before the answer, in a worker thread) before it takes effect. Creating an existing ACL
succeeds and changes nothing. When the set cannot be stored, every valid entry is
UNKNOWN_SERVER_ERROR and nothing changes. With no authorizer configured every entry is
SECURITY_DISABLED, as in Kafka.

Versions: v1 resource_pattern_type (PREFIXED, KIP-290); v2 flexible; v3 same as v2. v0 (no
pattern type) is not in the generated spec and not served.

Deviations: none known.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from onceflow.broker.acl_wire import binding_from_creation, change_acls
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_acls import CreateAclsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.create_acls import CreateAclsRequest
    from onceflow.security.authorizer import AclCreateResult

log = logging.getLogger("onceflow.broker.create_acls")

_Result = CreateAclsResponse.AclCreationResult


def _all(request: CreateAclsRequest, error: ErrorCode, message: str | None) -> CreateAclsResponse:
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[_Result(error_code=error, error_message=message) for _ in request.creations],
    )


async def handle_create_acls(
    ctx: RequestContext, header: RequestHeader, request: CreateAclsRequest
) -> CreateAclsResponse:
    """Add ACLs, durably."""
    bindings = [binding_from_creation(c) for c in request.creations]

    def answer(results: list[AclCreateResult]) -> CreateAclsResponse:
        log.info("CreateAcls from %s (%s): %d entries", ctx.peer, ctx.principal, len(bindings))
        return CreateAclsResponse(
            throttle_time_ms=0,
            results=[
                _Result(error_code=r.error_code, error_message=r.error_message) for r in results
            ],
        )

    return await change_acls(
        ctx,
        ApiKey.CREATE_ACLS,
        lambda authorizer: authorizer.prepare_create_acls(bindings),
        answer,
        lambda error, message: _all(request, error, message),
    )
