"""One raw admin request from a sub-command: `run_request(args, command, action)` opens the
bootstrap connection the shared options describe (`cli.options.client_properties`), runs the
action with a `send(request)` function, and turns a failure into one line and exit code 1.
Used by `onceflow users` and `onceflow acls`, which speak APIs the `AdminClient` has no
method for."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Protocol, TypeVar

from onceflow.cli.options import CommandError, client_properties, fail
from onceflow.client.admin_connections import AdminConnections
from onceflow.client.errors import BrokerResponseError, KafkaError
from onceflow.protocol.message import Message, Request

_Response = TypeVar("_Response", bound=Message)


class Send(Protocol):
    """Sends a request to the bootstrap broker; returns the response of the request's type."""

    def __call__(self, request: Request[_Response], /) -> _Response: ...


def run_request(args: argparse.Namespace, command: str, action: Callable[[Send], int]) -> int:
    """`action(send)` on a connection to the bootstrap broker; exit code 1 on any failure."""
    connections = AdminConnections(client_properties(args))

    def send(request: Request[_Response], /) -> _Response:
        return connections.bootstrap().send(request)

    try:
        return action(send)
    except (KafkaError, BrokerResponseError, CommandError, OSError) as exc:
        return fail(command, str(exc))
    finally:
        connections.close()
