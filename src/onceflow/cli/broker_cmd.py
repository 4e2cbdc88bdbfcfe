"""`onceflow broker`: run a broker in the foreground until SIGTERM or SIGINT.

When the listener is bound it prints exactly one line to stdout,
`onceflow broker ready on HOST:PORT` (the bound port, so `--listen 127.0.0.1:0` is usable by
scripts and tests), and logs everything else to stderr. A bad configuration exits with status 2.

With `--console HOST:PORT` it also serves the web console (`onceflow console`, read-only) for
itself, from a thread of the same process (`onceflow.console.server`), as a client of its own
first listener, with the broker's own metrics when `onceflow.metrics.listener` is set; the
console's address is logged, not printed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onceflow.broker.config import BrokerConfig, ConfigError, parse_listener
from onceflow.cli.namespace import Subparsers, from_args
from onceflow.console.server import ConsoleServer, console_address

if TYPE_CHECKING:
    from onceflow.broker.server import Broker

log = logging.getLogger("onceflow.broker.cli")


@dataclass(frozen=True)
class BrokerOptions:
    data_dir: str | None
    listen: str | None
    advertised_listener: str | None
    config: str | None
    overrides: list[str]
    log_level: str
    console: str | None


def add_parser(subparsers: Subparsers) -> None:
    """Register the `broker` sub-command."""
    parser = subparsers.add_parser(
        "broker",
        help="run a single-node Kafka-compatible broker",
        description="Run a single-node Kafka-compatible broker in the foreground.",
    )
    parser.add_argument("--data-dir", help="data directory (Kafka's log.dirs)")
    parser.add_argument("--listen", metavar="HOST:PORT", help="address to bind; port 0 picks one")
    parser.add_argument(
        "--advertised-listener",
        metavar="HOST:PORT",
        help="address given to clients in metadata (default: the bound address)",
    )
    parser.add_argument("--config", metavar="FILE", help="Java-properties file of broker configs")
    parser.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="overrides",
        help="override one config (repeatable), e.g. --set num.partitions=3",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="any case (default INFO)",
    )
    parser.add_argument(
        "--console",
        metavar="HOST:PORT",
        help="also serve the web console (read-only) for this broker at HOST:PORT; needs the "
        "console extra (docs/console.md)",
    )
    parser.set_defaults(func=run)


def configure_logging(level: str) -> None:
    """One line per event on stderr, logger names under `onceflow.broker`; timestamps in UTC
    (ISO 8601 with milliseconds and a Z)."""
    handler = logging.StreamHandler(sys.stderr)
    formatter = logging.Formatter(
        "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S"
    )
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def load_config(args: BrokerOptions) -> BrokerConfig:
    """The config file, then the dedicated flags, then `--set` overrides."""
    extra: dict[str, str] = {}
    if args.data_dir:
        extra["log.dirs"] = args.data_dir
    if args.listen:
        extra["listeners"] = f"PLAINTEXT://{parse_listener(args.listen, '--listen')}"
    if args.advertised_listener:
        advertised = parse_listener(args.advertised_listener, "--advertised-listener")
        extra["advertised.listeners"] = f"PLAINTEXT://{advertised}"
    return BrokerConfig.load(args.config, args.overrides, extra)


def run(namespace: argparse.Namespace) -> int:
    """Entry point of `onceflow broker`; returns the process exit code."""
    args = from_args(BrokerOptions, namespace)
    configure_logging(args.log_level)
    try:
        config = load_config(args)
    except ConfigError as exc:
        print(f"onceflow broker: {exc}", file=sys.stderr)
        return 2
    if not (args.data_dir or config.is_explicit("log.dirs") or config.is_explicit("log.dir")):
        # Kafka falls back to /tmp/kafka-logs; a durable broker asks where its data belongs
        print("onceflow broker: --data-dir (or log.dirs) is required", file=sys.stderr)
        return 2
    if os.path.exists(config.data_dir) and not os.path.isdir(config.data_dir):
        print(
            f"onceflow broker: data directory {config.data_dir} exists and is not a directory",
            file=sys.stderr,
        )
        return 2
    try:
        console = console_address(args.console) if args.console else None
    except ValueError as exc:
        print(f"onceflow broker: {exc}", file=sys.stderr)
        return 2
    for key in config.unknown_keys:
        log.warning("unknown config %s ignored", key)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_serve(config, console))
    return uvloop.run(_serve(config, console))


def _start_console(
    bootstrap: str, address: tuple[str, int], metrics_url: str | None = None
) -> ConsoleServer:
    """The console for the broker at `bootstrap` (and its `metrics_url`), serving at `address`
    (blocking: run it in a thread, not on the broker's event loop)."""
    from onceflow.console.app import create_app

    app: Any = create_app({"bootstrap.servers": bootstrap}, metrics_url=metrics_url)
    server = ConsoleServer(app, name="broker-console")
    server.start(*address)
    return server


def _metrics_url(broker: Broker) -> str | None:
    """The URL of the broker's own /metrics listener, if it has one (a wildcard address is
    reached on loopback)."""
    bound = broker.metrics_server.bound if broker.metrics_server is not None else None
    if bound is None:
        return None
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(bound.host, bound.host)
    return f"http://{f'[{host}]' if ':' in host else host}:{bound.port}/metrics"


async def _serve(config: BrokerConfig, console_at: tuple[str, int] | None = None) -> int:
    from onceflow.broker.server import Broker

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    broker = Broker(config)
    try:
        await broker.start()
    except (OSError, ConfigError) as exc:
        log.error("cannot start: %s", exc)
        await broker.stop()
        return 2 if isinstance(exc, ConfigError) else 1
    console = None
    if console_at is not None:
        try:
            console = await asyncio.to_thread(
                _start_console, broker.bound_address, console_at, _metrics_url(broker)
            )
        except OSError as exc:
            log.error("cannot start the console: %s", exc)
            await broker.stop()
            return 1
        log.info("console on http://%s:%d/", *console_at)
    print(f"onceflow broker ready on {broker.bound_address}", flush=True)
    await stopping.wait()
    log.info("shutting down")
    if console is not None:
        await asyncio.to_thread(console.stop)
    await broker.stop()
    log.info("stopped")
    return 0
