"""One raw admin request from a sub-command: `run_request(args, command, action)` opens the
bootstrap connection the shared options describe (`cli.options.client_properties`), runs the
action with a `send(request)` function, and turns a failure into one line and exit code 1.
Used by `onceflow users` and `onceflow acls`, which speak APIs the `AdminClient` has no
method for."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from onceflow.cli.options import CommandError, client_properties, fail
from onceflow.client.admin_connections import AdminConnections
from onceflow.client.errors import BrokerResponseError, KafkaError

Send = Callable[[Any], Any]


def run_request(args: argparse.Namespace, command: str, action: Callable[[Send], int]) -> int:
    """`action(send)` on a connection to the bootstrap broker; exit code 1 on any failure."""
    connections = AdminConnections(client_properties(args))
    try:
        return action(lambda request: connections.bootstrap().send(request))
    except (KafkaError, BrokerResponseError, CommandError, OSError) as exc:
        return fail(command, str(exc))
    finally:
        connections.close()
