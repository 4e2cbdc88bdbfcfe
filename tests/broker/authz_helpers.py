"""Helpers for the authorization tests: a broker with the ACL authorizer on, and ACL setup
through CreateAcls as an admin (a super user) would."""

from __future__ import annotations

import asyncio

from broker.broker_helpers import call, open_state
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.create_acls import CreateAclsRequest
from onceflow.security.acl import AclOperation, PatternType, PermissionType, ResourceType

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN = "User:admin"
ALICE = "User:alice"
MALLORY = "User:mallory"
AUTHZ = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": ADMIN}
# the handler tests' helpers call as User:ANONYMOUS: a super user too, so they set things up
ANONYMOUS_ADMIN = {"super.users": f"{ADMIN};User:ANONYMOUS"}

_Creation = CreateAclsRequest.AclCreation


def open_authz_state(data_dir, **overrides):
    """A BrokerState with the ACL authorizer on and `User:admin` as super user."""
    return open_state(data_dir, **{**AUTHZ, **overrides})


def creation(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    principal: str = ALICE,
    permission: PermissionType = PermissionType.ALLOW,
    pattern_type: PatternType = PatternType.LITERAL,
    host: str = "*",
):
    return _Creation(
        resource_type=resource_type,
        resource_name=name,
        resource_pattern_type=pattern_type,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


def grant(state, *creations) -> None:
    """Create ACLs as the super user; every entry must succeed."""
    asyncio.run(grant_async(state, *creations))


async def grant_async(state, *creations) -> None:
    """`grant` on a running loop."""
    request = CreateAclsRequest(creations=list(creations))
    response = await call(state, ApiKey.CREATE_ACLS, 3, request, principal=ADMIN)
    errors = [r.error_code for r in response.results]
    if any(errors):
        raise AssertionError(f"CreateAcls failed: {errors}")
