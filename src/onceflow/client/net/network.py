"""Asynchronous broker connections for the producer and consumer I/O threads.

`AsyncBrokerConnection` is an asyncio protocol over one TCP connection around the protocol core
`wire.WireConnection` (shared with the blocking `connection.BrokerConnection`), which
negotiates versions with ApiVersions (for each API the highest version both sides support, so
it works with Apache Kafka as well as onceflow), frames requests with a fresh correlation id
and matches the pipelined responses in order. `send()` returns an asyncio future of the
decoded response. A request that outlives its deadline closes the connection and fails
everything in flight on it with `KafkaTimeoutError`, as Kafka's `NetworkClient` does. With
TLS (`ClientSecurity.ssl_context`) the transport is asyncio's TLS transport, verifying the
broker's certificate against the host connected to; SASL is the protocol core's.

`NetworkClient` keeps one connection per node (bootstrap servers first), refreshes `Metadata`
in the background and finds the least-loaded node for metadata and InitProducerId requests.
A node whose connection attempt failed is not tried again for `reconnect.backoff.ms`, doubled
per consecutive failure up to `reconnect.backoff.max.ms` with +/-20% jitter (KIP-144); a
connection that opens resets it. `any_connection` (which needs some broker now) tries every
node regardless of its backoff, as before.
A failed SASL login or TLS handshake (`AuthenticationError`: `SslAuthenticationError` for an
untrusted or misnamed broker certificate, a refused client certificate) is not a broker that
may come back: it is logged once as an error, handed to `Metadata.authentication_failed` (the
producer's and consumer's calls raise it) and retried only every AUTH_RETRY_BACKOFF_S, in case
the credentials or certificates are fixed. A TLS alert that arrives while the connection is
still in its ApiVersions/SASL handshake (TLS 1.3 reports a refused client certificate after
the client's side of the TLS handshake is done) counts as a failed TLS handshake too.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, overload

from onceflow.client.errors import (
    AuthenticationError,
    BrokerResponseError,
    ConfigException,
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    UnsupportedVersionError,
)
from onceflow.client.net.address import split_host_port
from onceflow.client.net.backoff import FailureBackoff, reconnect_backoff
from onceflow.client.net.metadata import Cluster, Metadata
from onceflow.client.net.security import PLAINTEXT, ClientSecurity, ssl_authentication_error
from onceflow.client.net.tasks import BackgroundTasks
from onceflow.client.net.wire import WireConnection
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.message import Message, Request
from onceflow.protocol.messages.metadata import MetadataRequest
from onceflow.security.sasl import SaslAuthenticationError

__all__ = ["AsyncBrokerConnection", "NetworkClient"]

log = logging.getLogger(__name__)
CONNECT_WARNING_INTERVAL_S = 10.0
COORDINATOR_ID_BASE = 1 << 30  # connection ids of coordinators: base + node id * 2 + key type
AUTH_RETRY_BACKOFF_S = 5.0  # after a failed SASL login, instead of reconnect.backoff.ms
# SASL refused or unsupported, TLS handshake failed; a SASL exchange out of order
AUTHENTICATION_ERRORS = (AuthenticationError, IllegalSaslStateError)


_R = TypeVar("_R", bound=Message)


class AsyncBrokerConnection(asyncio.Protocol):
    """One pipelined connection to a broker (use from the I/O thread's loop only)."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        client_id: str | None,
        security: ClientSecurity = PLAINTEXT,
    ):
        self.node_id, self.host, self.port = node_id, host, port
        self.client_id = client_id
        self.ssl_context = security.ssl_context
        self._wire = WireConnection(client_id, security.sasl())
        self._transport: asyncio.Transport | None = None
        self._closed_error: BaseException | None = None
        self._handshake_step: asyncio.Future[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def connect(self, timeout_s: float) -> AsyncBrokerConnection:
        """Connect and negotiate versions; raises KafkaConnectionError / KafkaTimeoutError (or
        TimeoutError when a handshake response is late by `timeout_s`)."""
        loop = asyncio.get_running_loop()
        await self._prepare_sasl(loop, timeout_s)
        tls = self.ssl_context
        try:
            await asyncio.wait_for(
                loop.create_connection(
                    lambda: self,
                    self.host,
                    self.port,
                    ssl=tls,
                    server_hostname=self.host if tls is not None else None,
                ),
                timeout_s,
            )
        except TimeoutError as exc:
            raise KafkaTimeoutError(f"connecting to {self.host}:{self.port} timed out") from exc
        except OSError as exc:
            tls_error = ssl_authentication_error(exc, self.host, self.port)
            if tls_error is not None:
                raise tls_error from exc
            what = "TLS handshake with" if self.ssl_context is not None else "cannot connect to"
            raise KafkaConnectionError(
                f"{what} {self.host}:{self.port}: {exc.strerror or exc}"
            ) from exc
        try:
            self._flush()
            while self._wire.handshaking:  # each handshake response within timeout_s
                self._handshake_step = loop.create_future()
                await asyncio.wait_for(self._handshake_step, timeout_s)
            if not self.ready:  # closed while the last step's result waited to be seen
                raise self._closed_error or KafkaConnectionError(
                    f"connection to {self.host}:{self.port} closed"
                )
        except BaseException as exc:
            self.close(exc if isinstance(exc, Exception) else None)
            raise
        return self

    async def _prepare_sasl(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        """The SASL mechanism's blocking work (an OAUTHBEARER token fetch) on a worker
        thread, so that the loop serves other connections meanwhile."""
        sasl = self._wire.sasl
        if sasl is None:
            return
        try:
            await asyncio.wait_for(loop.run_in_executor(None, sasl.prepare), timeout_s)
        except TimeoutError as exc:
            raise KafkaTimeoutError(
                f"preparing the {sasl.mechanism} login to {self.host}:{self.port} timed out"
            ) from exc
        except SaslAuthenticationError as exc:  # the token provider failed
            raise SaslAuthenticationFailedError(exc.client_message) from None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        error = None
        if exc is not None and self._wire.handshaking:  # e.g. a TLS 1.3 certificate alert
            error = ssl_authentication_error(exc, self.host, self.port)
        lost = f"connection to {self.host}:{self.port} lost: {exc or 'closed'}"
        self._fail_all(error or KafkaConnectionError(lost))

    def close(self, error: BaseException | None = None) -> None:
        """Close the connection and fail every pending request with `error`."""
        self._fail_all(
            error or KafkaConnectionError(f"connection to {self.host}:{self.port} closed")
        )

    def _fail_all(self, error: BaseException) -> None:
        if self._closed_error is None:
            self._closed_error = error
        transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()
        step = self._handshake_step
        if step is not None and not step.done():
            step.set_exception(error)
        for request in self._wire.close():
            future = request.context  # None for the core's own handshake requests
            if future is not None and not future.done():
                future.set_exception(error)

    @property
    def ready(self) -> bool:
        """Connected and through the handshake."""
        return self._transport is not None and self._wire.ready

    @property
    def closed(self) -> bool:
        return self._transport is None

    @property
    def in_flight(self) -> int:
        return self._wire.in_flight

    def expired(self, now: float) -> bool:
        """True when the oldest request is past its deadline."""
        oldest = self._wire.oldest_pending
        return oldest is not None and oldest.deadline < now

    # ------------------------------------------------------------------ versions

    @property
    def broker_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's version range per api key, from ApiVersions."""
        return self._wire.broker_versions

    def api_version(self, api_key: int, max_version: int | None = None) -> int:
        """Highest version of `api_key` both sides support (capped at `max_version`)."""
        return self._wire.api_version(api_key, max_version)

    def supports(self, api_key: int) -> bool:
        return self._wire.supports(api_key)

    # ------------------------------------------------------------------ requests

    @overload
    def send(
        self,
        request: Request[_R],
        version: int | None = None,
        *,
        timeout_s: float = 30.0,
        expect_response: Literal[True] = True,
    ) -> asyncio.Future[_R]: ...

    @overload
    def send(
        self,
        request: Request[_R],
        version: int | None = None,
        *,
        timeout_s: float = 30.0,
        expect_response: bool,
    ) -> asyncio.Future[_R | None]: ...

    def send(
        self,
        request: Request[_R],
        version: int | None = None,
        *,
        timeout_s: float = 30.0,
        expect_response: bool = True,
    ) -> asyncio.Future[Any]:
        """Write a request now; the future resolves to the decoded response (None when
        `expect_response` is false, e.g. Produce with acks=0)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()  # the overloads say of what
        if self._transport is None:
            future.set_exception(
                self._closed_error or KafkaConnectionError(f"not connected to {self.host}")
            )
            return future
        self._wire.send_request(
            request,
            version,
            expect_response=expect_response,
            context=future,
            deadline=time.monotonic() + timeout_s,
        )
        self._transport.writelines(self._wire.data_to_send())
        if not expect_response:
            future.set_result(None)
        return future

    def _flush(self) -> bool:
        """Write what the protocol core queued; True if there was something."""
        parts = self._wire.data_to_send()
        if parts and self._transport is not None:
            self._transport.writelines(parts)
        return bool(parts)

    def data_received(self, data: bytes) -> None:
        wire = self._wire
        wire.receive_data(data)
        try:
            while (event := wire.next_event()) is not None:
                future = event.request.context
                if future.done():
                    continue
                if event.error is not None:
                    future.set_exception(event.error)
                else:
                    future.set_result(event.message)
        except Exception as exc:  # the response broke the conversation: the core is closed
            self.close(exc)
            return
        step = self._handshake_step
        if self._flush() or not wire.handshaking:  # a KIP-511 retry was sent, or done
            if step is not None and not step.done():
                step.set_result(None)


class NetworkClient:
    """Connections by node id, bootstrap, metadata refresh, request timeouts."""

    def __init__(self, config: Mapping[str, Any], metadata: Metadata):
        self.config = config
        self.metadata = metadata
        self.client_id = config["client.id"] or None
        self.security: ClientSecurity = getattr(config, "security", PLAINTEXT)
        self.on_auth_error: Callable[[], None] | None = None  # wakes the client's waiters
        self.request_timeout_s = config["request.timeout.ms"] / 1000
        self.connect_timeout_s = config["socket.connection.setup.timeout.ms"] / 1000
        self.reconnect_backoff = FailureBackoff(reconnect_backoff(config))
        self.bootstrap = [_parse_address(a) for a in config["bootstrap.servers"]]
        self._conns: dict[int, AsyncBrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[AsyncBrokerConnection | None]] = {}
        self._last_warning: dict[int, float] = {}  # node id -> when a failure was last logged
        self._reconnect_at: dict[int, float] = {}  # node id -> no connection attempt before
        self._bootstrap_index = 0
        self._coordinator_addresses: dict[int, tuple[str, int]] = {}
        self._refreshing = False
        self.tasks = BackgroundTasks(log)
        self.wakeup: asyncio.Event | None = None
        self.allow_auto_topic_creation = config["allow.auto.create.topics"]

    # ------------------------------------------------------------------ connections

    def _address(self, node_id: int) -> tuple[str, int] | None:
        coordinator = self._coordinator_addresses.get(node_id)
        if coordinator is not None:
            return coordinator
        if node_id < 0:
            return self.bootstrap[(-node_id - 1) % len(self.bootstrap)]
        node = self.metadata.cluster.brokers.get(node_id)
        return (node.host, node.port) if node is not None else None

    def connection(self, node_id: int) -> AsyncBrokerConnection | None:
        """The node's ready connection, or None (a connection attempt is then started)."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.ready:
            return conn
        if node_id not in self._connecting:
            if time.monotonic() >= self._reconnect_at.get(node_id, 0.0):
                self._connecting[node_id] = asyncio.ensure_future(self._connect(node_id))
        return None

    def time_to_reconnect(self, now: float) -> float | None:
        """Seconds until the earliest node in reconnect backoff may be tried again (None
        when none is waiting), so that an I/O loop does not sleep past it."""
        waits = [at - now for at in self._reconnect_at.values() if at > now]
        return min(waits) if waits else None

    async def _connect(self, node_id: int) -> AsyncBrokerConnection | None:
        address = None
        try:
            address = self._address(node_id)
            if address is None:
                return None
            conn = AsyncBrokerConnection(
                node_id, address[0], address[1], self.client_id, self.security
            )
            await conn.connect(self.connect_timeout_s)
            old = self._conns.get(node_id)
            if old is not None:
                old.close()
            self._conns[node_id] = conn
            self.reconnect_backoff.succeeded(node_id)
            self._reconnect_at.pop(node_id, None)
            return conn
        except AUTHENTICATION_ERRORS as exc:
            if self.metadata.auth_error is None:
                where = f"{address[0]}:{address[1]}" if address is not None else "no address"
                log.error("authentication with node %s (%s) failed: %s", node_id, where, exc)
            self._reconnect_at[node_id] = (
                time.monotonic() + AUTH_RETRY_BACKOFF_S + self.reconnect_backoff.failed(node_id)
            )
            self.metadata.authentication_failed(exc, time.monotonic())
            if self.on_auth_error is not None:
                self.on_auth_error()
            return None
        except (OSError, KafkaTimeoutError, BrokerResponseError, UnsupportedVersionError) as exc:
            now = time.monotonic()
            # like Kafka's clients, say so at WARNING (at most every CONNECT_WARNING_INTERVAL_S
            # per node, so a dead broker does not flood the log between retries)
            if now - self._last_warning.get(node_id, -CONNECT_WARNING_INTERVAL_S) >= (
                CONNECT_WARNING_INTERVAL_S
            ):
                self._last_warning[node_id] = now
                where = f"{address[0]}:{address[1]}" if address is not None else "no address"
                log.warning(
                    "connection to node %s (%s) could not be established; broker may not be "
                    "available: %s",
                    node_id,
                    where,
                    exc,
                )
            else:
                log.debug("connection to node %s failed: %s", node_id, exc)
            self._reconnect_at[node_id] = now + self.reconnect_backoff.failed(node_id)
            self.metadata.request_update()
            return None
        finally:
            self._connecting.pop(node_id, None)
            if self.wakeup is not None:
                self.wakeup.set()

    async def await_connection(self, node_id: int) -> AsyncBrokerConnection | None:
        """Connect to `node_id` if needed and wait for the outcome."""
        conn = self.connection(node_id)
        if conn is not None:
            return conn
        task = self._connecting.get(node_id)
        if task is None:
            return None
        return await asyncio.shield(task)

    async def coordinator_connection(
        self, key_type: int, node_id: int, host: str, port: int
    ) -> AsyncBrokerConnection:
        """A connection of its own to a coordinator (as Kafka's clients keep one), so that
        coordinator requests never queue behind fetches or produce requests on the broker's
        in-order connection. Raises KafkaConnectionError when it cannot connect."""
        conn_id = COORDINATOR_ID_BASE + node_id * 2 + key_type
        if self._coordinator_addresses.get(conn_id) != (host, port):
            self._coordinator_addresses[conn_id] = (host, port)
            old = self._conns.pop(conn_id, None)
            if old is not None:
                old.close()
        conn = await self.await_connection(conn_id)
        if conn is None:
            raise KafkaConnectionError(f"cannot connect to coordinator {host}:{port}")
        return conn

    async def any_connection(self) -> AsyncBrokerConnection:
        """The least-loaded ready connection, connecting to a broker (or bootstrap server)
        if there is none. Raises KafkaConnectionError when nothing is reachable."""
        ready = [c for n, c in self._conns.items() if c.ready and n < COORDINATOR_ID_BASE]
        if ready:
            return min(ready, key=lambda c: c.in_flight)
        candidates = list(self.metadata.cluster.brokers) + [
            -(i + 1) for i in range(len(self.bootstrap))
        ]
        start = self._bootstrap_index
        self._bootstrap_index += 1
        for i in range(len(candidates)):
            node_id = candidates[(start + i) % len(candidates)]
            self._reconnect_at.pop(node_id, None)  # try each now; failures still count
            conn = await self.await_connection(node_id)
            if conn is not None:
                return conn
        raise KafkaConnectionError("no broker reachable (bootstrap.servers and metadata)")

    def check_timeouts(self) -> None:
        """Close connections whose oldest request is past its deadline."""
        now = time.monotonic()
        for conn in list(self._conns.values()):
            if conn.expired(now):
                log.info("request to %s:%s timed out; closing", conn.host, conn.port)
                conn.close(
                    KafkaTimeoutError(
                        f"request to {conn.host}:{conn.port} timed out (request.timeout.ms)"
                    )
                )

    def close(self) -> None:
        for task in self._connecting.values():
            task.cancel()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # ------------------------------------------------------------------ metadata

    async def refresh_metadata(self) -> None:
        """Send one Metadata request for the wanted topics and install the answer."""
        if self._refreshing:
            return
        self._refreshing = True
        self.metadata.need_update = False
        now = time.monotonic()
        try:
            conn = await self.any_connection()
            cls = MetadataRequest
            version = conn.api_version(ApiKey.METADATA)
            topics = [cls.MetadataRequestTopic(name=t) for t in sorted(self.metadata.wanted)]
            request = cls(topics=topics, allow_auto_topic_creation=self.allow_auto_topic_creation)
            response = await conn.send(request, version, timeout_s=self.request_timeout_s)
            self.metadata.update(Cluster.from_response(response), time.monotonic())
        except (OSError, KafkaTimeoutError, BrokerResponseError, UnsupportedVersionError) as exc:
            log.debug("metadata refresh failed: %s", exc)
            self.metadata.need_update = True
            self.metadata.failed_update(exc, now)
        finally:
            self._refreshing = False
            if self.wakeup is not None:
                self.wakeup.set()

    def _refresh_crashed(self, exc: BaseException) -> None:
        """A refresh raised unexpectedly: count it as a failed refresh (retried after the
        backoff; waiters see the error)."""
        self.metadata.need_update = True
        self.metadata.failed_update(exc, time.monotonic())

    def maybe_refresh_metadata(self) -> float:
        """Start a refresh if one is due; returns seconds until the next is due."""
        now = time.monotonic()
        delay = self.metadata.time_to_next_update(now)
        if delay <= 0 and not self._refreshing:
            self.tasks.spawn(self.refresh_metadata(), "metadata refresh", self._refresh_crashed)
            delay = 0.0
        if delay <= 0:
            delay = self.metadata.retry_backoff_ms / 1000
        reconnect = self.time_to_reconnect(now)
        return delay if reconnect is None else min(delay, reconnect)


def _parse_address(address: str) -> tuple[str, int]:
    parsed = split_host_port(address)
    if parsed is None:
        raise ConfigException(f"Invalid url in bootstrap.servers: {address}")
    return parsed
