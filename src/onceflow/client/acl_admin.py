"""ACLs for `AdminClient`: CreateAcls, DescribeAcls and DeleteAcls (Kafka's `Admin.createAcls`,
`describeAcls`, `deleteAcls`), with Kafka's ACL model from `onceflow.security.acl`.

The requests go to the bootstrap broker (Kafka forwards them to its controller). A cluster
without an authorizer answers SECURITY_DISABLED; the caller needs ALTER (create, delete) or
DESCRIBE (describe) on the CLUSTER where ACLs are checked. Results carry error codes, as the
rest of the admin client; `AclResult.raise_for_error()` raises the typed error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from onceflow.client.admin_connections import AdminConnections, known_code
from onceflow.client.errors import raise_for_error
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_acls import CreateAclsRequest
from onceflow.protocol.messages.delete_acls import DeleteAclsRequest
from onceflow.protocol.messages.describe_acls import DescribeAclsRequest
from onceflow.security.acl import AclBinding, AclBindingFilter, binding_of

__all__ = ["AclResult", "DeletedAcls", "create_acls", "delete_acls", "describe_acls"]


@dataclass(frozen=True)
class AclResult:
    """The outcome of one creation or one filter."""

    error_code: ErrorCode
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code == ErrorCode.NONE

    def raise_for_error(self) -> None:
        raise_for_error(self.error_code, self.error_message or "ACL request")


@dataclass(frozen=True)
class DeletedAcls:
    """DeleteAcls for one filter: its error, and the bindings it deleted."""

    result: AclResult
    bindings: tuple[AclBinding, ...] = ()


class AclFilterFields(TypedDict):
    """A filter as the keyword arguments of DescribeAcls and DeleteAcls' filter."""

    resource_type_filter: int
    resource_name_filter: str | None
    pattern_type_filter: int
    principal_filter: str | None
    host_filter: str | None
    operation: int
    permission_type: int


def _filter_fields(f: AclBindingFilter) -> AclFilterFields:
    pattern, entry = f.pattern_filter, f.entry_filter
    return {
        "resource_type_filter": pattern.resource_type,
        "resource_name_filter": pattern.name,
        "pattern_type_filter": pattern.pattern_type,
        "principal_filter": entry.principal,
        "host_filter": entry.host,
        "operation": entry.operation,
        "permission_type": entry.permission_type,
    }


_NOT_CREATABLE = {"ANY", "MATCH", "UNKNOWN"}


def create_acls(net: AdminConnections, bindings: Iterable[AclBinding]) -> list[AclResult]:
    """One result per binding, in order. A binding with an ANY, MATCH or UNKNOWN value is a
    filter, not an ACL: `ValueError` before anything is sent (Kafka's `ResourcePattern` and
    `AccessControlEntry` refuse them too; Kafka's broker fails the whole request on one)."""
    cls = CreateAclsRequest
    bindings = list(bindings)
    for b in bindings:
        values = (b.pattern.resource_type, b.pattern.pattern_type, b.entry.operation,
                  b.entry.permission_type)  # fmt: skip
        if any(v.name in _NOT_CREATABLE for v in values):
            raise ValueError(f"not an ACL that can be created (a filter value in it): {b}")
    creations = [
        cls.AclCreation(
            resource_type=b.pattern.resource_type,
            resource_name=b.pattern.name,
            resource_pattern_type=b.pattern.pattern_type,
            principal=b.entry.principal,
            host=b.entry.host,
            operation=b.entry.operation,
            permission_type=b.entry.permission_type,
        )
        for b in bindings
    ]
    response = net.bootstrap().send(cls(creations=creations))
    return [AclResult(known_code(r.error_code), r.error_message) for r in response.results]


def describe_acls(net: AdminConnections, acl_filter: AclBindingFilter) -> list[AclBinding]:
    """The bindings that match the filter; raises on an error (SECURITY_DISABLED, ...)."""
    cls = DescribeAclsRequest
    response = net.bootstrap().send(cls(**_filter_fields(acl_filter)))
    AclResult(known_code(response.error_code), response.error_message).raise_for_error()
    return [
        binding_of(
            r.resource_type,
            r.resource_name,
            r.pattern_type,
            a.principal,
            a.host,
            a.operation,
            a.permission_type,
        )  # fmt: skip
        for r in response.resources
        for a in r.acls
    ]


def delete_acls(net: AdminConnections, filters: Iterable[AclBindingFilter]) -> list[DeletedAcls]:
    """One result per filter, in order, with the bindings each deleted."""
    cls = DeleteAclsRequest
    request = cls(filters=[cls.DeleteAclsFilter(**_filter_fields(f)) for f in filters])
    out = []
    for r in net.bootstrap().send(request).filter_results:
        deleted = tuple(
            binding_of(
                m.resource_type,
                m.resource_name,
                m.pattern_type,
                m.principal,
                m.host,
                m.operation,
                m.permission_type,
            )  # fmt: skip
            for m in r.matching_acls
            if m.error_code == ErrorCode.NONE
        )
        out.append(DeletedAcls(AclResult(known_code(r.error_code), r.error_message), deleted))
    return out
