"""DescribeAcls handler.

API: DescribeAcls (key 29), versions 1-3.

Behaviour: needs DESCRIBE on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED. Answers the ACLs
the filter matches (`AclAuthorizer.describe_acls`: ANY and MATCH pattern types, null name,
principal and host match anything), grouped by resource pattern. A filter with an UNKNOWN
field is INVALID_REQUEST. With no authorizer configured: SECURITY_DISABLED, as in Kafka.

Versions: v1 pattern types (KIP-290); v2 flexible; v3 same as v2.

Deviations: none known.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from onceflow.broker.acl_wire import NO_AUTHORIZER_MESSAGE, filter_from_wire
from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_acls import DescribeAclsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_acls import DescribeAclsRequest
    from onceflow.security.acl import AccessControlEntry, AclBinding, ResourcePattern

_Resource = DescribeAclsResponse.DescribeAclsResource
_Acl = _Resource.AclDescription


def _resources(bindings: Iterable[AclBinding]) -> list[_Resource]:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return [
        _Resource(
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            acls=[
                _Acl(
                    principal=e.principal,
                    host=e.host,
                    operation=e.operation,
                    permission_type=e.permission_type,
                )
                for e in entries
            ],
        )
        for pattern, entries in grouped.items()
    ]


async def handle_describe_acls(
    ctx: RequestContext, header: RequestHeader, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    """The ACLs matching the request's filter."""
    authorizer = ctx.broker.authorizer
    bindings: list[AclBinding]
    if authorizer is None:
        error, message, bindings = ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_MESSAGE, []
    elif (refused := denied(ctx, ApiKey.DESCRIBE_ACLS, "cluster")) is not None:
        error, message, bindings = refused, None, []
    else:
        error, message, bindings = authorizer.describe_acls(filter_from_wire(request))
    return DescribeAclsResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        resources=_resources(bindings),
    )
