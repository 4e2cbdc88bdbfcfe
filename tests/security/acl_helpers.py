"""Shared helpers for the security tests: short builders of ACL bindings and filters."""

from __future__ import annotations

from onceflow.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
ALICE = "User:alice"
BOB = "User:bob"
HOST = "10.0.0.1"
OTHER_HOST = "10.0.0.2"


def acl(
    permission: PermissionType,
    operation: AclOperation,
    name: str = "t",
    *,
    pattern_type: PatternType = LITERAL,
    resource_type: ResourceType = TOPIC,
    principal: str = ALICE,
    host: str = "*",
) -> AclBinding:
    """One ACL binding; by default for alice from any host on the literal topic `t`."""
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )


def allow(operation: AclOperation, name: str = "t", **kwargs) -> AclBinding:
    return acl(PermissionType.ALLOW, operation, name, **kwargs)


def deny(operation: AclOperation, name: str = "t", **kwargs) -> AclBinding:
    return acl(PermissionType.DENY, operation, name, **kwargs)


def binding_filter(
    resource_type: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern_type: PatternType = PatternType.ANY,
    principal: str | None = None,
    host: str | None = None,
    operation: AclOperation = AclOperation.ANY,
    permission: PermissionType = PermissionType.ANY,
) -> AclBindingFilter:
    """A filter; every field matches anything unless given."""
    return AclBindingFilter(
        ResourcePatternFilter(resource_type, name, pattern_type),
        AccessControlEntryFilter(principal, host, operation, permission),
    )
