"""What a handler sees of the broker and of the connection a request came on.

`RequestContext` is the first argument of every handler (`broker.dispatch.Handler`). It names
the connection through `ConnectionView`, the little a handler may do to it, so that this module
(and the handlers) need not import `broker.connection`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from onceflow.broker.listeners import Listener
    from onceflow.broker.sasl_authenticator import SaslAuthenticator
    from onceflow.broker.state import BrokerState

ANONYMOUS = "User:ANONYMOUS"  # Kafka's principal of an unauthenticated (PLAINTEXT) client


class ConnectionView(Protocol):
    """The part of a `broker.connection.ClientConnection` handlers use."""

    listener_name: str | None
    authenticator: SaslAuthenticator | None

    def begin_drain(self) -> None:
        """Close the connection once the responses already queued are written."""

    def close_with_error(self, reason: str) -> None:
        """Close the connection now, with one log line giving `reason`."""


class RequestContext:
    """The broker and the connection a request came on.

    `peer` is `host:port` of the client, `client_host` its host alone (what ACLs match),
    `principal` who the client is (`User:name`; `User:ANONYMOUS` until a listener's TLS or SASL
    authentication says otherwise) and `listener_name` the listener it came in on (None: the
    first). `connection` is None when a test calls a handler directly."""

    __slots__ = ("broker", "peer", "client_host", "principal", "connection", "listener_name")

    def __init__(
        self,
        broker: BrokerState,
        peer: str,
        connection: ConnectionView | None,
        principal: str = ANONYMOUS,
        listener_name: str | None = None,
    ) -> None:
        self.broker = broker
        self.peer = peer
        self.client_host = peer.rpartition(":")[0] or peer
        self.principal = principal
        self.connection = connection
        self.listener_name = listener_name

    @property
    def advertised(self) -> Listener:
        """The address to give this client for this broker: its listener's advertised one."""
        return self.broker.advertised_for(self.listener_name)
