"""`onceflow configs describe|alter`: topic and broker configs, like kafka-configs.sh.

`describe --entity-type topics --entity-name T` prints the topic's overrides (Kafka's "dynamic"
configs); `--all` prints every config with its value and source. `--entity-type brokers`
(`--entity-name` the node id, or `--entity-default`) prints the broker's configs. `alter
--add-config k1=v1,k2=[a,b] --delete-config k3,k4` changes a topic's overrides with
IncrementalAlterConfigs, validated by the broker exactly as at creation (a bad value is
INVALID_CONFIG and changes nothing) and stored durably. onceflow's broker configs are static:
altering one is refused with the broker's message. Exit codes: 0 done, 1 refused or broker
error, 2 bad usage.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from onceflow.cli.namespace import Subparsers, from_args
from onceflow.cli.options import add_action, add_command, client_properties, fail
from onceflow.client.admin import AdminClient
from onceflow.client.config_admin import AlterOp, ConfigResource
from onceflow.client.errors import KafkaError
from onceflow.protocol.errors import ErrorCode

NAME = "configs"
TYPES = {"topics": 2, "brokers": 4}
SET, DELETE = 0, 1
_ITEM = re.compile(r"([^=,\s]+)=(\[[^\]]*\]|[^,]*)")


@dataclass(frozen=True)
class EntityOptions:
    """Which entity, for both actions."""

    parser: argparse.ArgumentParser
    entity_type: str
    entity_name: str | None
    entity_default: bool


@dataclass(frozen=True)
class DescribeOptions:
    all: bool


@dataclass(frozen=True)
class AlterOptions:
    parser: argparse.ArgumentParser
    add_config: str
    delete_config: str


def add_parser(subparsers: Subparsers) -> None:
    """Register the `configs` sub-command and its actions."""
    actions = add_command(
        subparsers, NAME, "describe and alter topic and broker configs", __doc__.split("\n\n", 1)[1]
    )
    for action, func in (("describe", run_describe), ("alter", run_alter)):
        sub = add_action(actions, action, f"{action} configs", func)
        sub.add_argument("--entity-type", choices=sorted(TYPES), required=True)
        target = sub.add_mutually_exclusive_group(required=True)
        target.add_argument("--entity-name", metavar="NAME", help="topic name or broker id")
        target.add_argument("--entity-default", action="store_true", help="the broker default")
        if action == "describe":
            sub.add_argument("--all", action="store_true", help="every config, not only overrides")
        else:
            sub.add_argument("--add-config", metavar="K=V,K=[A,B]", default="")
            sub.add_argument("--delete-config", metavar="K,K", default="")


def _resource(namespace: argparse.Namespace) -> ConfigResource:
    args = from_args(EntityOptions, namespace)
    if args.entity_default and args.entity_type != "brokers":
        args.parser.error("--entity-default applies to brokers only")
    if args.entity_default or args.entity_name is None:  # argparse requires one of the two
        return ConfigResource(TYPES[args.entity_type], "")
    return ConfigResource(TYPES[args.entity_type], args.entity_name)


def run_describe(args: argparse.Namespace) -> int:
    resource = _resource(args)
    show_all = from_args(DescribeOptions, args).all
    try:
        with AdminClient(client_properties(args)) as admin:
            result = admin.describe_configs([resource])[resource]
    except (KafkaError, OSError) as exc:
        return fail(NAME, str(exc))
    if result.error_code != ErrorCode.NONE:
        return fail(NAME, f"{resource.name}: {result.error_code.name} ({result.error_message})")
    entries = sorted((result.entries or {}).values(), key=lambda e: e.name)
    if not show_all and resource.resource_type == TYPES["topics"]:
        entries = [e for e in entries if e.source == "DYNAMIC_TOPIC_CONFIG"]
    kind = "topic" if resource.resource_type == TYPES["topics"] else "broker"
    label = resource.name or "default"
    print(f"{'All' if show_all else 'Dynamic'} configs for {kind} {label} are:")
    for e in entries:
        print(f"  {e.name}={'' if e.value is None else e.value} ({e.source})")
    return 0


def _parse_add(parser: argparse.ArgumentParser, text: str) -> list[AlterOp]:
    ops, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _ITEM.match(text, position)
        if match is None:
            parser.error(f"--add-config {text!r}: expected k1=v1,k2=[v1,v2,v2],k3=v3")
        value = match.group(2)
        if value.startswith("["):
            value = ",".join(v.strip() for v in value[1:-1].split(",") if v.strip())
        ops.append(AlterOp(match.group(1), SET, value))
        position = match.end()
        if position < len(text):
            if text[position] != ",":
                parser.error(f"--add-config {text!r}: expected ',' at position {position}")
            position += 1
    return ops


def run_alter(args: argparse.Namespace) -> int:
    resource = _resource(args)
    given = from_args(AlterOptions, args)
    ops = _parse_add(given.parser, given.add_config)
    ops += [AlterOp(k.strip(), DELETE) for k in given.delete_config.split(",") if k.strip()]
    if not ops:
        given.parser.error("nothing to change: give --add-config and/or --delete-config")
    try:
        with AdminClient(client_properties(args)) as admin:
            result = admin.incremental_alter_configs({resource: ops})[resource]
    except (KafkaError, OSError) as exc:
        return fail(NAME, str(exc))
    if result.error_code != ErrorCode.NONE:
        return fail(NAME, f"{result.error_code.name}: {result.error_message}")
    kind = "topic" if resource.resource_type == TYPES["topics"] else "broker"
    print(f"Completed updating config for {kind} {resource.name}.")
    return 0
