"""CreateAcls/DescribeAcls/DeleteAcls entries as the ACL model's values (`security.acl`), and
the gate CreateAcls and DeleteAcls share (`change_acls`).

Unknown enum codes decode to UNKNOWN, as Kafka's `fromCode` does, so the authorizer's
validation answers INVALID_REQUEST for that entry instead of the request failing to decode.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.security.acl import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePatternFilter,
    ResourceType,
    binding_of,
)
from onceflow.security.acl import from_code as code

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.messages.create_acls import CreateAclsRequest
    from onceflow.protocol.messages.delete_acls import DeleteAclsRequest
    from onceflow.protocol.messages.describe_acls import DescribeAclsRequest
    from onceflow.security.authorizer import AclAuthorizer, AclUpdate

R = TypeVar("R")
T = TypeVar("T")

log = logging.getLogger("onceflow.broker.acls")

NO_AUTHORIZER_MESSAGE = "No Authorizer is configured on the broker"


def binding_from_creation(c: CreateAclsRequest.AclCreation) -> AclBinding:
    """A CreateAcls `AclCreation` as a binding."""
    return binding_of(
        c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
        c.operation, c.permission_type,
    )  # fmt: skip


def filter_from_wire(
    f: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter,
) -> AclBindingFilter:
    """A DescribeAcls request or DeleteAcls `DeleteAclsFilter` as a binding filter."""
    rtype, ptype = (
        code(ResourceType, f.resource_type_filter),
        code(PatternType, f.pattern_type_filter),
    )
    op, perm = code(AclOperation, f.operation), code(PermissionType, f.permission_type)
    return AclBindingFilter(
        ResourcePatternFilter(rtype, f.resource_name_filter, ptype),
        AccessControlEntryFilter(f.principal_filter, f.host_filter, op, perm),
    )


async def change_acls(
    ctx: RequestContext,
    api_key: ApiKey,
    prepare: Callable[[AclAuthorizer], tuple[list[T], AclUpdate]],
    answer: Callable[[list[T]], R],
    refuse: Callable[[ErrorCode, str | None], R],
) -> R:
    """CreateAcls' and DeleteAcls' common path: with no authorizer every entry is
    SECURITY_DISABLED, without ALTER on the CLUSTER the refusal code, and when the new ACL set
    cannot be stored UNKNOWN_SERVER_ERROR (`refuse(error, message)` answers every entry);
    otherwise `answer(results)` of `prepare` (`BrokerState.change_acls`)."""
    name = api_key.name.title().replace("_", "")
    if ctx.broker.authorizer is None:
        return refuse(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_MESSAGE)
    error = denied(ctx, api_key, "cluster")
    if error is not None:
        log.info("%s from %s (%s) refused: %s", name, ctx.peer, ctx.principal, error.name)
        return refuse(error, None)
    try:
        results = await ctx.broker.change_acls(prepare)
    except OSError as exc:
        log.error("%s: cannot store the ACLs: %s", name, exc)
        return refuse(ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store the ACLs: {exc}")
    return answer(results)
