"""`onceflow console`: serve a web console for a Kafka-compatible cluster, read-only unless
started with --allow-actions.

The console talks to the cluster through onceflow's AdminClient only (so it works on Apache
Kafka too) and shows brokers and topics, each partition's last stable offset and the open
transaction pinning it, every transactional id (hanging ones flagged), consumer groups with
their lag, the Spark sink's progress markers, and a message browser per topic. Each page's
data is also served as JSON under /api/ (/api/overview, /api/topics/NAME, /api/transactions,
/api/groups, /api/spark, /api/topics/NAME/messages). With --allow-actions it can also abort a
hanging transaction and reset a group's offsets (dry run first), as the identity its client
properties give it: the cluster's ACLs decide. With --metrics-url (an onceflow broker's
onceflow.metrics.listener) the overview adds a "Broker metrics" panel (fsync latency, fenced
producers, transactions, the log cleaner, request rates) and a topic page its compacted
partitions' cleaning; Apache Kafka has no such endpoint.
It needs the `console` extra: pip install 'onceflow[console]'. See docs/console.md.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from onceflow.cli.namespace import Subparsers, from_args, value
from onceflow.cli.options import add_bootstrap, client_properties

NAME = "console"
DEFAULT_LISTEN = "127.0.0.1:8080"


@dataclass(frozen=True)
class ConsoleOptions:
    parser: argparse.ArgumentParser
    listen: str
    hanging_after_ms: int | None
    allow_actions: bool
    metrics_url: str | None


def add_parser(subparsers: Subparsers) -> None:
    """Register the `console` sub-command."""
    parser = subparsers.add_parser(
        NAME,
        help="serve a web console for a cluster (read-only unless --allow-actions)",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_bootstrap(parser)
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"address the web server listens on (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--hanging-after-ms",
        type=int,
        default=None,
        metavar="MS",
        help="count a transaction open longer than this as hanging (default: the broker's "
        "transaction.max.timeout.ms)",
    )
    parser.add_argument(
        "--allow-actions",
        action="store_true",
        help="enable the pages that change the cluster: abort a hanging transaction, reset a "
        "group's offsets (each asks for confirmation)",
    )
    parser.add_argument(
        "--metrics-url",
        metavar="URL",
        help="an onceflow broker's Prometheus endpoint (http://HOST:PORT/metrics, its "
        "onceflow.metrics.listener): adds the broker's own figures to the overview and topic "
        "pages",
    )
    parser.set_defaults(func=run, parser=parser)


def run(namespace: argparse.Namespace) -> int:
    args = from_args(ConsoleOptions, namespace)
    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit():
        args.parser.error(f"--listen {args.listen!r}: expected HOST:PORT")
    config = client_properties(namespace)
    bootstrap_server = value(namespace, "bootstrap_server", str)  # set by client_properties
    try:
        import uvicorn

        from onceflow.console.app import create_app
    except ModuleNotFoundError as exc:
        args.parser.error(f"{exc.name} is missing: pip install 'onceflow[console]'")
    if args.metrics_url and not args.metrics_url.startswith(("http://", "https://")):
        args.parser.error(f"--metrics-url {args.metrics_url!r}: expected http://HOST:PORT/metrics")
    app = create_app(
        config, args.hanging_after_ms, args.allow_actions, metrics_url=args.metrics_url
    )
    print(f"onceflow console on http://{host}:{port}/ for {bootstrap_server}", flush=True)
    uvicorn.run(app, host=host.strip("[]"), port=int(port), log_level="warning")
    return 0
