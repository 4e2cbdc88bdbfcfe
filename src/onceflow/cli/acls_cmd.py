"""`onceflow acls add|list|remove`: ACLs over CreateAcls, DescribeAcls and DeleteAcls, shaped
like Kafka's `kafka-acls.sh --add|--list|--remove`.

- Resources: `--topic NAME`, `--group NAME`, `--transactional-id ID` (each repeatable) and
  `--cluster`; `--resource-pattern-type` is `literal` (default) or `prefixed`, and for list
  and remove also `any` or `match` (every pattern that matches the name, as Kafka).
- Entries: `--allow-principal P` / `--deny-principal P` (repeatable, `User:NAME`), each with
  `--allow-host` / `--deny-host` (repeatable, default `*`), and `--operation OP` (repeatable,
  Kafka's names: Read, Write, Create, Delete, Alter, Describe, ClusterAction,
  DescribeConfigs, AlterConfigs, IdempotentWrite, All; default All).
- `add` creates every combination of resource, principal, host and operation.
- `list` prints the ACLs matching the resources (every ACL without one) and `--principal P`
  (repeatable), tab-separated with a header line.
- `remove` deletes the ACLs matching the resources and, when given, the principals, hosts and
  operations; with no principal every ACL on the resources. Unlike `kafka-acls.sh` it does not
  ask for confirmation (`--force` is accepted and changes nothing).

Needs ALTER (add, remove) or DESCRIBE (list) on the CLUSTER when the broker checks ACLs; a
broker without an authorizer answers SECURITY_DISABLED. A refusal prints one line to stderr
and exits 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import product

from onceflow.cli.admin_request import Send, run_request
from onceflow.cli.namespace import Subparsers, from_args, value
from onceflow.cli.options import CommandError, add_action, add_command
from onceflow.client.acl_admin import AclFilterFields
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_acls import CreateAclsRequest
from onceflow.protocol.messages.delete_acls import DeleteAclsRequest
from onceflow.protocol.messages.describe_acls import DescribeAclsRequest
from onceflow.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)

NAME = "acls"
OPERATIONS = {
    op.name.replace("_", "").lower(): op
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
CREATE_PATTERNS = ("literal", "prefixed")
FILTER_PATTERNS = ("any", "match", *CREATE_PATTERNS)
HEADER = "ResourceType\tName\tPatternType\tPrincipal\tHost\tOperation\tPermission"

Resource = tuple[ResourceType, str]
Entry = tuple[str, str, AclOperation, PermissionType]  # principal, host, operation, permission
EntryFilter = tuple[str | None, str | None, AclOperation, PermissionType]  # None: any


@dataclass(frozen=True)
class ResourceOptions:
    """The resource options of every action (`_resource_options`)."""

    topic: list[str]
    group: list[str]
    transactional_id: list[str]
    cluster: bool
    resource_pattern_type: str


@dataclass(frozen=True)
class EntryOptions:
    """The entry options of add and remove (`_entry_options`)."""

    allow_principal: list[str]
    allow_host: list[str]
    deny_principal: list[str]
    deny_host: list[str]
    operation: list[AclOperation]


@dataclass(frozen=True)
class PrincipalOptions:
    """`list --principal` (repeatable)."""

    principal: list[str]


def _operation(text: str) -> AclOperation:
    operation = OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
    if operation is None:
        names = ", ".join(op.name.title().replace("_", "") for op in OPERATIONS.values())
        raise argparse.ArgumentTypeError(f"unknown operation {text!r}; one of {names}")
    return operation


def _resource_options(sub: argparse.ArgumentParser, patterns: tuple[str, ...]) -> None:
    for flag in ("--topic", "--group", "--transactional-id"):
        sub.add_argument(flag, action="append", default=[], metavar="NAME")
    sub.add_argument("--cluster", action="store_true", help="the cluster resource")
    sub.add_argument("--resource-pattern-type", choices=patterns, default="literal")


def _entry_options(sub: argparse.ArgumentParser) -> None:
    for kind in ("allow", "deny"):
        sub.add_argument(f"--{kind}-principal", action="append", default=[], metavar="P")
        sub.add_argument(f"--{kind}-host", action="append", default=[], metavar="HOST")
    sub.add_argument("--operation", action="append", type=_operation, default=[], metavar="OP")


def add_parser(subparsers: Subparsers) -> None:
    """Register the `acls` sub-command and its actions."""
    actions = add_command(
        subparsers,
        NAME,
        "add, list and remove ACLs, like kafka-acls.sh",
        __doc__.split("\n\n", 1)[1],
    )
    add = add_action(actions, "add", "create ACLs", run_add)
    _resource_options(add, CREATE_PATTERNS)
    _entry_options(add)
    listing = add_action(actions, "list", "list ACLs", run_list)
    _resource_options(listing, FILTER_PATTERNS)
    listing.add_argument("--principal", action="append", default=[], metavar="P")
    remove = add_action(actions, "remove", "delete ACLs", run_remove)
    _resource_options(remove, FILTER_PATTERNS)
    _entry_options(remove)
    remove.add_argument("--force", action="store_true", help="accepted; never asks")


def _resources(args: ResourceOptions) -> list[Resource]:
    resources = [(ResourceType.TOPIC, n) for n in args.topic]
    resources += [(ResourceType.GROUP, n) for n in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, n) for n in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return resources


def _entries(args: EntryOptions) -> list[Entry]:
    """Every (principal, host, operation, permission) the entry options name."""
    operations = args.operation or [AclOperation.ALL]
    entries = []
    for principals, given_hosts, permission in (
        (args.allow_principal, args.allow_host, PermissionType.ALLOW),
        (args.deny_principal, args.deny_host, PermissionType.DENY),
    ):
        hosts = given_hosts or ["*"]
        for principal, host, operation in product(principals, hosts, operations):
            entries.append((principal, host, operation, permission))
    return entries


def _row(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> str:
    return "\t".join(
        [
            ResourceType(resource_type).name,
            name,
            PatternType(pattern_type).name,
            principal,
            host,
            AclOperation(operation).name,
            PermissionType(permission).name,
        ]
    )


def _pattern(args: ResourceOptions) -> PatternType:
    return PatternType[args.resource_pattern_type.upper()]


def _check(error_code: int, message: str | None, what: str) -> None:
    if error_code != ErrorCode.NONE:
        raise CommandError(f"{what}: {ErrorCode(error_code).name} ({message})")


def run_add(args: argparse.Namespace) -> int:
    parser = value(args, "parser", argparse.ArgumentParser)
    given = from_args(ResourceOptions, args)
    resources, entries = _resources(given), _entries(from_args(EntryOptions, args))
    if not resources:
        parser.error("give a resource: --topic, --group, --transactional-id or --cluster")
    if not entries:
        parser.error("give --allow-principal and/or --deny-principal")
    pattern = _pattern(given)
    creations = [
        CreateAclsRequest.AclCreation(
            resource_type=rtype,
            resource_name=name,
            resource_pattern_type=pattern,
            principal=principal,
            host=host,
            operation=operation,
            permission_type=permission,
        )
        for (rtype, name), (principal, host, operation, permission) in product(resources, entries)
    ]

    def action(send: Send) -> int:
        response = send(CreateAclsRequest(creations=creations))
        failures = []
        print(HEADER)
        for c, result in zip(creations, response.results, strict=True):
            row = _row(c.resource_type, c.resource_name, pattern, c.principal, c.host,
                       c.operation, c.permission_type)  # fmt: skip
            if result.error_code == ErrorCode.NONE:
                print(row)
            else:
                code = ErrorCode(result.error_code).name
                failures.append(f"{row.replace(chr(9), ' ')}: {code} ({result.error_message})")
        if failures:
            raise CommandError("; ".join(failures))
        return 0

    return run_request(args, NAME, action)


def _filters(
    args: ResourceOptions, resources: list[Resource], entries: Iterable[EntryFilter]
) -> list[AclFilterFields]:
    """DescribeAcls/DeleteAcls filter fields: each resource (or any) with each entry."""
    pattern = _pattern(args)
    resource_filters: list[tuple[int, str | None, int]] = [
        (t, n, pattern) for t, n in resources
    ] or [
        (
            ResourceType.ANY,
            None,
            PatternType.ANY if args.resource_pattern_type == "literal" else pattern,
        )
    ]
    return [
        AclFilterFields(
            resource_type_filter=resource_type,
            resource_name_filter=name,
            pattern_type_filter=pattern_type,
            principal_filter=principal,
            host_filter=host,
            operation=operation,
            permission_type=permission,
        )
        for (resource_type, name, pattern_type), (
            principal,
            host,
            operation,
            permission,
        ) in product(resource_filters, entries)
    ]


_ANY_ENTRY: EntryFilter = (None, None, AclOperation.ANY, PermissionType.ANY)


def run_list(args: argparse.Namespace) -> int:
    given = from_args(ResourceOptions, args)
    principals = from_args(PrincipalOptions, args).principal
    entries: list[EntryFilter] = [(p, *_ANY_ENTRY[1:]) for p in principals] or [_ANY_ENTRY]
    filters = _filters(given, _resources(given), entries)

    def action(send: Send) -> int:
        rows: set[str] = set()
        for fields in filters:
            response = send(DescribeAclsRequest(**fields))
            _check(response.error_code, response.error_message, "DescribeAcls")
            for r in response.resources:
                for a in r.acls:
                    rows.add(_row(r.resource_type, r.resource_name, r.pattern_type, a.principal,
                                  a.host, a.operation, a.permission_type))  # fmt: skip
        print(HEADER)
        for row in sorted(rows):
            print(row)
        return 0

    return run_request(args, NAME, action)


def run_remove(args: argparse.Namespace) -> int:
    parser = value(args, "parser", argparse.ArgumentParser)
    given, entry_options = from_args(ResourceOptions, args), from_args(EntryOptions, args)
    resources = _resources(given)
    if not resources:
        parser.error("give a resource: --topic, --group, --transactional-id or --cluster")
    entries: list[EntryFilter] = [*_entries(entry_options)] or [_ANY_ENTRY]
    if entry_options.operation and entries == [_ANY_ENTRY]:
        parser.error("--operation needs --allow-principal or --deny-principal")
    filters = [DeleteAclsRequest.DeleteAclsFilter(**f) for f in _filters(given, resources, entries)]

    def action(send: Send) -> int:
        response = send(DeleteAclsRequest(filters=filters))
        print(HEADER)
        for result in response.filter_results:
            _check(result.error_code, result.error_message, "DeleteAcls")
            for m in result.matching_acls:
                _check(m.error_code, m.error_message, "DeleteAcls")
                print(_row(m.resource_type, m.resource_name, m.pattern_type, m.principal,
                           m.host, m.operation, m.permission_type))  # fmt: skip
        return 0

    return run_request(args, NAME, action)
