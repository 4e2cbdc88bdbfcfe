"""`cli.namespace`: each sub-command's options dataclass agrees with its parser (names, `type=`
and defaults), and a value of the wrong type is refused with the option's name."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from onceflow.cli import (
    acls_cmd,
    broker_cmd,
    configs_cmd,
    console_cmd,
    consume_cmd,
    demo_cmd,
    groups_cmd,
    produce_cmd,
    spark_cmd,
    topics_cmd,
    transactions_cmd,
    users_cmd,
)
from onceflow.cli.main import build_parser
from onceflow.cli.namespace import from_args, optional, value
from onceflow.cli.options import ConnectionOptions
from onceflow.security.acl import AclOperation

# argv -> the options dataclasses its command reads; each argv gives the optional options a
# value, or leaves them at their defaults, so that both sides of `X | None` are parsed.
CASES: list[tuple[list[str], tuple[type, ...]]] = [
    (["broker"], (broker_cmd.BrokerOptions,)),
    (
        ["broker", "--data-dir", "d", "--listen", "h:1", "--advertised-listener", "h:2",
         "--config", "c", "--set", "a=b", "--log-level", "debug", "--console", "h:3"],
        (broker_cmd.BrokerOptions,),
    ),
    (["topics", "list"], (topics_cmd.ListOptions, ConnectionOptions)),
    (
        ["topics", "list", "--bootstrap-server", "b:1", "--request-timeout-ms", "5",
         "--command-config", "f", "-X", "a=b"],
        (ConnectionOptions,),
    ),
    (["topics", "create", "--topic", "t"], (topics_cmd.CreateOptions,)),
    (
        ["topics", "create", "--topic", "t", "--partitions", "3", "--replication-factor", "1",
         "--config", "a=b", "--if-not-exists"],
        (topics_cmd.CreateOptions,),
    ),
    (["topics", "describe"], (topics_cmd.DescribeOptions,)),
    (
        ["topics", "describe", "--topic", "t", "--metrics-url", "http://h:1/metrics"],
        (topics_cmd.DescribeOptions,),
    ),
    (["topics", "delete", "--topic", "t", "--if-exists"], (topics_cmd.DeleteOptions,)),
    (["topics", "alter", "--topic", "t", "--partitions", "3"], (topics_cmd.AlterOptions,)),
    (["topics", "delete-records", "--offset-json-file", "f"], (topics_cmd.DeleteRecordsOptions,)),
    (
        ["topics", "delete-records", "--topic", "t", "--partition", "0", "--offset", "5"],
        (topics_cmd.DeleteRecordsOptions,),
    ),
    (["produce", "t"], (produce_cmd.ProduceOptions, ConnectionOptions)),
    (
        ["produce", "t", "--file", "f", "--key-separator", ":", "--partition", "1", "--header",
         "a=b", "--transactional-id", "x", "--delimiter", "\\0"],
        (produce_cmd.ProduceOptions,),
    ),
    (["consume", "t"], (consume_cmd.ConsumeOptions, ConnectionOptions)),
    (
        ["consume", "t", "--group", "g", "--max-messages", "3", "--timeout-ms", "5",
         "--isolation", "READ_UNCOMMITTED", "-f", "%k %s\\n", "--from-beginning"],
        (consume_cmd.ConsumeOptions,),
    ),
    (["consume", "t", "--partition", "0", "--offset", "5"], (consume_cmd.ConsumeOptions,)),
    (["consume", "t", "--timestamp", "1"], (consume_cmd.ConsumeOptions,)),
    (["groups", "list", "--state"], (ConnectionOptions,)),
    (["groups", "describe", "--group", "g", "--group", "h"], (groups_cmd.GroupIds,)),
    (["groups", "delete", "--group", "g"], (groups_cmd.GroupIds,)),
    (
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-earliest"],
        (groups_cmd.ResetOptions,),
    ),
    (
        ["groups", "reset-offsets", "--group", "g", "--topic", "t:0", "--shift-by", "-1",
         "--execute"],
        (groups_cmd.ResetOptions,),
    ),
    (
        ["groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "2026-01-01"],
        (groups_cmd.ResetOptions,),
    ),
    (
        ["groups", "reset-offsets", "--group", "g", "--all-topics", "--to-offset", "3"],
        (groups_cmd.ResetOptions,),
    ),
    (
        ["configs", "describe", "--entity-type", "topics", "--entity-name", "t", "--all"],
        (configs_cmd.EntityOptions, configs_cmd.DescribeOptions),
    ),
    (
        ["configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config", "a=b"],
        (configs_cmd.EntityOptions, configs_cmd.AlterOptions),
    ),
    (["transactions", "list"], (transactions_cmd.ListOptions,)),
    (
        ["transactions", "list", "--state", "ongoing", "--producer-id", "1",
         "--duration-filter-ms", "5"],
        (transactions_cmd.ListOptions,),
    ),
    (["transactions", "describe", "--transactional-id", "x"], (transactions_cmd.DescribeOptions,)),
    (
        ["transactions", "describe-producers", "--topic", "t", "--partition", "0"],
        (transactions_cmd.ProducersOptions,),
    ),
    (["transactions", "find-hanging", "--topic", "t"], (transactions_cmd.HangingOptions,)),
    (
        ["transactions", "find-hanging", "--broker-id", "1", "--partition", "0",
         "--max-transaction-timeout", "0.5"],
        (transactions_cmd.HangingOptions,),
    ),
    (
        ["transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "3"],
        (transactions_cmd.AbortOptions,),
    ),
    (
        ["transactions", "abort", "--topic", "t", "--partition", "0", "--producer-id", "1",
         "--producer-epoch", "2", "--coordinator-epoch", "3"],
        (transactions_cmd.AbortOptions,),
    ),
    (["users", "add", "u"], (users_cmd.AddOptions,)),
    (["users", "add", "u", "--iterations", "8192", "--password-stdin"], (users_cmd.AddOptions,)),
    (["users", "list"], (users_cmd.ListOptions,)),
    (["users", "list", "u", "v"], (users_cmd.ListOptions,)),
    (["users", "remove", "u"], (users_cmd.RemoveOptions,)),
    (["users", "remove", "u", "--mechanism", "SCRAM-SHA-256"], (users_cmd.RemoveOptions,)),
    (
        ["acls", "add", "--topic", "t", "--allow-principal", "User:a", "--operation", "read"],
        (acls_cmd.ResourceOptions, acls_cmd.EntryOptions),
    ),
    (["acls", "list"], (acls_cmd.ResourceOptions, acls_cmd.PrincipalOptions)),
    (
        ["acls", "list", "--group", "g", "--principal", "User:a", "--resource-pattern-type",
         "match"],
        (acls_cmd.ResourceOptions, acls_cmd.PrincipalOptions),
    ),
    (
        ["acls", "remove", "--cluster", "--deny-principal", "User:a", "--deny-host", "h"],
        (acls_cmd.ResourceOptions, acls_cmd.EntryOptions),
    ),
    (["spark", "forget", "--prefix", "p"], (spark_cmd.ForgetOptions,)),
    (["spark", "forget", "--checkpoint", "c", "--execute"], (spark_cmd.ForgetOptions,)),
    (["console"], (console_cmd.ConsoleOptions, ConnectionOptions)),
    (
        ["console", "--listen", "h:1", "--hanging-after-ms", "5", "--allow-actions",
         "--metrics-url", "http://h:2/metrics"],
        (console_cmd.ConsoleOptions,),
    ),
    (["demo"], (demo_cmd.DemoOptions,)),
    (
        ["demo", "--records", "200", "--bootstrap", "b:1", "--keep", "--timeout", "5",
         "--report", "r.html", "--console", "h:1", "--faults", "driver"],
        (demo_cmd.DemoOptions,),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "options"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_every_commands_options_read_its_parsed_arguments(argv, options):
    args = build_parser().parse_args(argv)
    for kind in options:
        from_args(kind, args)  # raises if a name or a type disagrees with the parser


def test_options_hold_the_parsed_values():
    args = build_parser().parse_args(
        ["acls", "remove", "--topic", "t", "--allow-principal", "User:a", "--operation", "read"]
    )
    entries = from_args(acls_cmd.EntryOptions, args)
    assert entries.operation == [AclOperation.READ] and entries.allow_host == []
    hanging = from_args(
        transactions_cmd.HangingOptions,
        build_parser().parse_args(["transactions", "find-hanging", "--topic", "t"]),
    )
    assert (hanging.topic, hanging.broker_id, hanging.max_transaction_timeout) == ("t", None, 15)


@dataclass(frozen=True)
class Sample:
    count: int
    name: str | None
    ids: list[int]
    ratio: float
    path: Path | None


GOOD = {"count": 1, "name": None, "ids": [1, 2], "ratio": 15, "path": Path("p")}


@pytest.mark.parametrize(
    ("field", "bad", "expected"),
    [
        ("count", "1", "option 'count': expected int, got str '1'"),
        ("count", True, "option 'count': expected int, got bool True"),
        ("count", None, "option 'count': expected int, got NoneType None"),
        ("name", 3, "option 'name': expected str | None, got int 3"),
        ("ids", [1, "2"], "option 'ids': expected list[int], got list [1, '2']"),
        ("ids", (1, 2), "option 'ids': expected list[int], got tuple (1, 2)"),
        ("ratio", "0.5", "option 'ratio': expected float, got str '0.5'"),
        ("path", "p", "option 'path': expected pathlib.Path | None, got str 'p'"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(field, bad, expected):
    assert from_args(Sample, argparse.Namespace(**GOOD)) == Sample(**GOOD)
    with pytest.raises(TypeError) as raised:
        from_args(Sample, argparse.Namespace(**{**GOOD, field: bad}))
    assert str(raised.value) == expected


def test_a_missing_option_is_an_error():
    with pytest.raises(AttributeError, match="ratio"):
        from_args(Sample, argparse.Namespace(**{k: v for k, v in GOOD.items() if k != "ratio"}))


def test_one_value():
    args = argparse.Namespace(n=3, s=None, flag=False)
    assert value(args, "n", int) == 3 and optional(args, "s", str) is None
    assert optional(args, "n", int) == 3 and value(args, "flag", bool) is False
    with pytest.raises(TypeError, match="option 'flag': expected int, got bool False"):
        value(args, "flag", int)
    with pytest.raises(TypeError, match="option 'n': expected str, got int 3"):
        optional(args, "n", str)
