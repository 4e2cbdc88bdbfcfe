"""Authorized operations: the `*_authorized_operations` bit fields of Metadata, DescribeGroups
and DescribeCluster.

Kafka answers them from `AuthHelper.authorizedOperations`: of the operations a resource type
supports (`AclEntry.supportedOperations`), those the authorizer allows the caller, as a bit
field with bit `1 << code` per `AclOperation`. With no authorizer configured every supported
operation is allowed; with the ACL authorizer on (`authorizer.class.name`), those it allows
the caller, here for all three APIs at once. A field the client did not
ask for is `AUTHORIZED_OPERATIONS_OMITTED` (INT32_MIN), as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from onceflow.security.acl import (  # AclOperation, ResourceType: defined there, re-exported
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
)

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext

AUTHORIZED_OPERATIONS_OMITTED: Final = -(2**31)


_Op = AclOperation

# Kafka 4.0's AclEntry.supportedOperations (groups gained DESCRIBE_CONFIGS/ALTER_CONFIGS with
# group configs, KAFKA-14510; Kafka 3.x answers READ, DESCRIBE, DELETE for a group)
SUPPORTED_OPERATIONS: Final[Mapping[ResourceType, frozenset[AclOperation]]] = MappingProxyType(
    {
        ResourceType.TOPIC: frozenset(
            {
                _Op.READ,
                _Op.WRITE,
                _Op.CREATE,
                _Op.DESCRIBE,
                _Op.DELETE,
                _Op.ALTER,
                _Op.DESCRIBE_CONFIGS,
                _Op.ALTER_CONFIGS,
            }
        ),
        ResourceType.GROUP: frozenset(
            {_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
        ),
        ResourceType.CLUSTER: frozenset(
            {
                _Op.CREATE,
                _Op.CLUSTER_ACTION,
                _Op.DESCRIBE_CONFIGS,
                _Op.ALTER_CONFIGS,
                _Op.IDEMPOTENT_WRITE,
                _Op.ALTER,
                _Op.DESCRIBE,
            }
        ),
        ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
        ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
        ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
    }
)


def to_bit_field(operations: Iterable[AclOperation]) -> int:
    """Kafka's `Utils.to32BitField`: bit `1 << code` set for each operation."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field


def authorized_operations(
    ctx: RequestContext, resource_type: ResourceType, name: str | None
) -> int:
    """The operations on resource `name` of `resource_type` (None: the cluster) that the
    caller of `ctx` may perform, as a bit field: every supported one with no authorizer."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return to_bit_field(supported)
    resource = CLUSTER_NAME if name is None else name
    return to_bit_field(
        op
        for op in supported
        if authorizer.authorize(ctx.principal, ctx.client_host, op, resource_type, resource)
    )


def operations_in(field: int) -> frozenset[AclOperation]:
    """The operations whose bits are set in `field` (for tests and tools)."""
    return frozenset(op for op in AclOperation if field >= 0 and field & (1 << int(op)))
