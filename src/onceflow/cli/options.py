"""Options the client sub-commands share: where the broker is, client properties, escapes.

Client properties come, later ones winning, from `--command-config FILE` (a Java properties
file, as Kafka's tools take: `security.protocol=SASL_SSL`, `sasl.mechanism=SCRAM-SHA-512`,
`sasl.username=...`, ...), then `-X KEY=VALUE`, then `--bootstrap-server` and
`--request-timeout-ms` when given (`bootstrap.servers` may come from the file instead).
"""

from __future__ import annotations

import argparse
import codecs
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from onceflow.cli.namespace import Subparsers, from_args
from onceflow.client.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from onceflow.properties import parse_properties

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Client = TypeVar("Client")
Options = TypeVar("Options", bound="DataclassInstance")
# a sub-command's entry point, set as its parser's `func` default: parsed arguments -> exit code
Run = Callable[[argparse.Namespace], int]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_REQUEST_TIMEOUT_MS = 30_000


def add_command(subparsers: Subparsers, name: str, help_text: str, description: str) -> Subparsers:
    """Register `onceflow NAME ACTION ...`; the subparsers its actions go into (`add_action`)."""
    parser = subparsers.add_parser(
        name,
        help=help_text,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser.add_subparsers(dest="action", metavar="ACTION", required=True)


def add_action(actions: Subparsers, name: str, help_text: str, run: Run) -> argparse.ArgumentParser:
    """One action of a command with the connection options (`add_bootstrap`): `run(args)` runs
    it, and finds its parser as `args.parser` (for usage errors)."""
    sub = actions.add_parser(name, help=help_text)
    add_bootstrap(sub)
    sub.set_defaults(func=run, parser=sub)
    return sub


def topic_command(
    subparsers: Subparsers, name: str, help_text: str, doc: str
) -> argparse.ArgumentParser:
    """A sub-command on one TOPIC with the shared options; its description is the module
    docstring after the first paragraph."""
    parser = subparsers.add_parser(
        name,
        help=help_text,
        description=doc.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("topic", metavar="TOPIC")
    add_bootstrap(parser)
    return parser


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    """`--bootstrap-server`, `--request-timeout-ms`, `--command-config FILE` and
    `-X KEY=VALUE` client properties."""
    parser.add_argument(
        "--bootstrap-server",
        default=None,
        metavar="HOST:PORT[,...]",
        help="broker(s) to connect to (default: bootstrap.servers of --command-config, "
        f"else {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help=f"how long to wait for the broker (default {DEFAULT_REQUEST_TIMEOUT_MS})",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="client properties file (Kafka's names, e.g. security.protocol, sasl.mechanism, "
        "sasl.username, sasl.password, ssl.ca.location), as Kafka's tools take",
    )
    parser.add_argument(
        "-X",
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="client configuration property, Kafka's name (repeatable)",
    )


@dataclass(frozen=True)
class ConnectionOptions:
    """The options `add_bootstrap` adds, as given."""

    command_config: Path | None
    property: list[str]
    bootstrap_server: str | None
    request_timeout_ms: int | None


def client_properties(args: argparse.Namespace) -> dict[str, Any]:
    """The client configuration the shared options describe (usage error on a bad -X or an
    unreadable --command-config). Sets `args.bootstrap_server` and `args.request_timeout_ms`
    to the values in effect."""
    given = from_args(ConnectionOptions, args)
    config: dict[str, Any] = {}
    if given.command_config is not None:
        try:
            config.update(parse_properties(given.command_config.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            _usage_error(args, f"--command-config {given.command_config}: {exc}")
    for item in given.property:
        key, sep, setting = item.partition("=")
        if not sep or not key:
            _usage_error(args, f"-X {item!r}: expected KEY=VALUE")
        config[key] = setting
    if given.bootstrap_server is not None:
        config["bootstrap.servers"] = given.bootstrap_server
    config.setdefault("bootstrap.servers", DEFAULT_BOOTSTRAP)
    if given.request_timeout_ms is not None:
        config["request.timeout.ms"] = given.request_timeout_ms
    config.setdefault("request.timeout.ms", DEFAULT_REQUEST_TIMEOUT_MS)
    args.bootstrap_server = str(config["bootstrap.servers"])
    args.request_timeout_ms = int(config["request.timeout.ms"])
    return config


def _usage_error(args: argparse.Namespace, message: str) -> None:
    parser = getattr(args, "parser", None)
    if not isinstance(parser, argparse.ArgumentParser):
        raise SystemExit(f"onceflow: {message}")
    parser.error(message)


def unescape(text: str) -> bytes:
    """A separator given on the command line (`\\n`, `\\t`, `\\0`, `\\x1f`) as bytes."""
    return codecs.escape_decode(text.encode())[0]


class CommandError(Exception):
    """A refusal or broker error to report on one line (exit 1)."""


def fail(command: str, message: str) -> int:
    """One line on stderr; exit code 1."""
    print(f"onceflow {command}: {message}", file=sys.stderr)
    return 1


def guarded(
    command: str,
    connect: Callable[[argparse.Namespace], AbstractContextManager[Client]],
    options: type[Options],
    action: Callable[[Client, Options], int],
    refusals: tuple[type[Exception], ...] = (CommandError,),
) -> Run:
    """`action(client, given)` on the client `connect(args)` opens, `given` the dataclass
    `options` read from the arguments (`namespace.from_args`): a broker out of reach, a Kafka
    error or one of `refusals` becomes one line on stderr and exit code 1."""

    reported: tuple[type[Exception], ...] = (KafkaError, BrokerResponseError, *refusals)

    def run(args: argparse.Namespace) -> int:
        given = from_args(options, args)
        try:
            with connect(args) as client:
                return action(client, given)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            return fail(command, f"cannot reach {args.bootstrap_server}: {exc}")
        except reported as exc:
            return fail(command, str(exc))

    run.__doc__ = action.__doc__
    return run
