"""`onceflow spark forget`: remove what a retired streaming query's exactly-once sink left on
the cluster.

The sink keeps one transactional id and one progress-marker group per write task partition,
named `<prefix>-<partition>`; the prefix is the sink's `transactional.id.prefix`, else
`onceflow-<Spark query id>`. `forget` finds them (`--prefix`, or `--checkpoint` to read the
query id from a local checkpoint), prints them, and with `--execute` aborts and fences every
transactional id (InitProducerId: a transaction the query left open ends) and deletes the
marker groups. Run it only for a query that will never restart from its checkpoint: a
restarted query would find no markers and write its committed batches again. Exit codes: 0
done (or nothing found), 1 a broker error or something that could not be removed, 2 bad usage.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from onceflow.cli.namespace import Subparsers, from_args, value
from onceflow.cli.options import add_action, add_command, client_properties, fail
from onceflow.client.errors import KafkaError

NAME = "spark"


@dataclass(frozen=True)
class ForgetOptions:
    prefix: str | None
    checkpoint: str | None
    execute: bool


def add_parser(subparsers: Subparsers) -> None:
    """Register the `spark` sub-command and its actions."""
    actions = add_command(
        subparsers,
        NAME,
        "housekeeping for the Spark connector's exactly-once sink",
        __doc__.split("\n\n", 1)[1],
    )
    forget = add_action(
        actions, "forget", "remove a retired query's marker groups and transactional ids", run
    )
    which = forget.add_mutually_exclusive_group(required=True)
    which.add_argument("--prefix", help="the sink's transactional.id.prefix")
    which.add_argument("--checkpoint", help="the query's checkpoint location (a local path)")
    mode = forget.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print what was found (default)")
    mode.add_argument("--execute", action="store_true", help="abort the ids, delete the groups")


def run(namespace: argparse.Namespace) -> int:
    from onceflow.spark.forget import find_query_state, forget_query_state, prefix_of_checkpoint

    args = from_args(ForgetOptions, namespace)
    config = client_properties(namespace)
    timeout_s = value(namespace, "request_timeout_ms", int) / 1000  # set by client_properties
    try:
        prefix = args.prefix or prefix_of_checkpoint(args.checkpoint)
        state = find_query_state(config, prefix)
        if state.empty:
            print(f"nothing to forget for prefix {prefix}")
            return 0
        rows = [["KIND", "NAME", "STATE"]]
        rows += [["marker group", g, ""] for g in state.groups]
        rows += [["transactional id", t, s] for t, s in state.transactional_ids.items()]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for row in rows:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        if not args.execute:
            print("dry run: nothing changed (add --execute to forget them)")
            return 0
        forget_query_state(config, state, timeout_s)
    except (KafkaError, OSError, ValueError) as exc:
        return fail(NAME, str(exc))
    for name, error in state.errors.items():
        print(f"{name}: {error}")
    if state.errors:
        return fail(NAME, f"{len(state.errors)} could not be removed")
    print(
        f"aborted and fenced {len(state.transactional_ids)} transactional ids, "
        f"deleted {len(state.groups)} marker groups"
    )
    return 0
