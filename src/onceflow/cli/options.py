"""Options the client sub-commands share: where the broker is, client properties, escapes."""

from __future__ import annotations

import argparse
import codecs
import sys
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def topic_command(
    subparsers: argparse._SubParsersAction, name: str, help_text: str, doc: str
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
    """`--bootstrap-server`, `--request-timeout-ms` and `-X KEY=VALUE` client properties."""
    parser.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        metavar="HOST:PORT[,...]",
        help=f"broker(s) to connect to (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=int,
        default=30_000,
        metavar="MS",
        help="how long to wait for the broker (default 30000)",
    )
    parser.add_argument(
        "-X",
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="client configuration property, Kafka's name (repeatable)",
    )


def client_properties(args: argparse.Namespace) -> dict[str, Any]:
    """The client configuration the shared options describe (usage error on a bad -X)."""
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap_server,
        "request.timeout.ms": args.request_timeout_ms,
    }
    for item in args.property:
        key, sep, value = item.partition("=")
        if not sep or not key:
            args.parser.error(f"-X {item!r}: expected KEY=VALUE")
        config[key] = value
    return config


def unescape(text: str) -> bytes:
    """A separator given on the command line (`\\n`, `\\t`, `\\0`, `\\x1f`) as bytes."""
    return codecs.escape_decode(text.encode())[0]


def fail(command: str, message: str) -> int:
    """One line on stderr; exit code 1."""
    print(f"onceflow {command}: {message}", file=sys.stderr)
    return 1
