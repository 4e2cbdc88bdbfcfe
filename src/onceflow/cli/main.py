"""The `onceflow` command: one sub-command per module in this package.

Each sub-command module exposes `add_parser(subparsers)`, which registers its parser and sets
`func` (taking the parsed arguments, returning an exit code) as the parser's default.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import sys

from onceflow.cli.namespace import Subparsers

# name of the module in onceflow.cli that provides each sub-command, in the order help lists them
SUBCOMMAND_MODULES = (
    "broker_cmd",
    "topics_cmd",
    "produce_cmd",
    "consume_cmd",
    "groups_cmd",
    "configs_cmd",
    "transactions_cmd",
    "users_cmd",
    "acls_cmd",
    "demo_cmd",
    "spark_cmd",
    "console_cmd",
)


def _version() -> str:
    try:
        return importlib.metadata.version("onceflow")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onceflow",
        description=(
            "Exactly-once streaming: a Kafka-compatible broker, client and Spark connectors."
        ),
    )
    parser.add_argument("--version", action="version", version=f"onceflow {_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"onceflow.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"onceflow.cli.{name}":
                raise
            continue
        module.add_parser(subparsers)
    _remember_parsers(subparsers)
    return parser


def _remember_parsers(subparsers: Subparsers) -> None:
    """Give every (sub-)sub-command parser itself as the default `_usage_parser`, so a usage
    error names the command the user typed, not the top level."""
    for sub in subparsers.choices.values():
        sub.set_defaults(_usage_parser=sub)
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                _remember_parsers(action)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        usage_parser = getattr(args, "_usage_parser", parser)
        usage_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
