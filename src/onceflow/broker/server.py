"""`Broker`: the asyncio TCP server tying connections, handlers and the data directory together.

`await start()` loads the data directory (recovering logs after a crash, rebuilding producer
state from snapshots plus the log), binds every listener of `listeners` (`SO_REUSEADDR`, so a
restarted broker can take its old port back at once; see `broker.listeners`), binds the
optional metrics listener (`onceflow.metrics.listener`, see `broker.metrics`) and starts the
periodic task: retention every `log.retention.check.interval.ms`, recovery-point checkpoints every
`log.flush.offset.checkpoint.interval.ms`, idle producer-id expiry every
`producer.id.expiration.check.interval.ms`, interval flushes every second (the task wakes at
least once a second, so shorter intervals act as one second). `await stop()` stops accepting, lets
in-flight requests finish and their responses go out (bounded by a timeout), closes every
connection, then flushes, fsyncs and closes every log and marks the shutdown clean.

TLS (SSL and SASL_SSL listeners): each accepted socket is upgraded with `loop.start_tls`
rather than by the server itself, so that a failed handshake (plaintext on a TLS port, an
untrusted or missing client certificate, an old protocol) is one warning line naming the peer
and listener, and the socket is closed; the connection's protocol starts only once the
handshake is done, with the principal of the client certificate (`broker.tls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl

from onceflow.broker.config import BrokerConfig, Listener
from onceflow.broker.connection import BrokerConnection
from onceflow.broker.listeners import ListenerSpec
from onceflow.broker.metrics import MetricsServer
from onceflow.broker.state import BrokerState

log = logging.getLogger("onceflow.broker.server")

DRAIN_TIMEOUT_S = 10.0
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class Broker:
    """A single-node Kafka-compatible broker."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.state: BrokerState | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[BrokerConnection] = set()
        self._periodic: asyncio.Task[None] | None = None
        self.bound: Listener | None = None  # the first listener's
        self.bound_listeners: dict[str, Listener] = {}
        self._ssl_context: ssl.SSLContext | None = None
        self._principal_mapper = None
        self.metrics_server: MetricsServer | None = None

    @property
    def bound_address(self) -> str:
        """`HOST:PORT` actually bound (valid after `start`)."""
        return str(self.bound)

    async def start(self) -> None:
        """Open the data directory, bind the listener, start background tasks."""
        config = self.config
        listeners = config.listeners
        if any(spec.protocol.uses_tls for spec in listeners):
            from onceflow.broker.tls import PrincipalMapper, server_context

            self._ssl_context = server_context(config)
            self._principal_mapper = PrincipalMapper(config.get("ssl.principal.mapping.rules"))
        loop = asyncio.get_running_loop()
        state = await loop.run_in_executor(None, BrokerState.open, config)
        self.state = state
        state.load_coordinators()
        # after the groups: finishing prepared transactions may write __consumer_offsets markers
        await state.transactions.start()
        for spec in listeners:
            server = await loop.create_server(
                lambda spec=spec: self._new_connection(spec),
                spec.bind.host,
                spec.bind.port,
                reuse_address=True,
                backlog=1024,
            )
            self._servers.append(server)
            bound = Listener(spec.bind.host, server.sockets[0].getsockname()[1])
            self.bound_listeners[spec.name] = bound
            state.advertised_by_listener[spec.name] = spec.advertised or bound
            log.info("listener %s (%s) on %s", spec.name, spec.protocol.value, bound)
        self.bound = self.bound_listeners[listeners[0].name]
        state.advertised = state.advertised_by_listener[listeners[0].name]
        if config.metrics_listener is not None:
            self.metrics_server = MetricsServer(state.metrics, state)
            await self.metrics_server.start(config.metrics_listener)
        self._periodic = loop.create_task(self._run_periodic())
        log.info(
            "broker %d listening on %s (advertised %s), cluster id %s, data dir %s",
            state.node_id,
            self.bound,
            state.advertised,
            state.cluster_id,
            config.data_dir,
        )

    def _new_connection(self, spec: ListenerSpec) -> asyncio.Protocol:
        authenticator = None
        if spec.protocol.uses_sasl:
            from onceflow.broker.sasl_authenticator import SaslAuthenticator

            config = self.config
            authenticator = SaslAuthenticator(
                self.state.credentials,
                config.sasl_enabled_mechanisms,
                config.get("connections.max.reauth.ms"),
            )
        connection = BrokerConnection(
            self.state,
            on_close=self._connections.discard,
            listener_name=spec.name,
            authenticator=authenticator,
        )
        self._connections.add(connection)
        if spec.protocol.uses_tls:
            return _TlsAcceptor(self, connection, spec)
        return connection

    async def _start_tls(
        self, transport: asyncio.Transport, connection: BrokerConnection, spec: ListenerSpec
    ) -> None:
        """Upgrade an accepted socket; on success start `connection` on the TLS transport."""
        peername = transport.get_extra_info("peername")
        peer = f"{peername[0]}:{peername[1]}" if isinstance(peername, tuple) else "?"
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(
                transport,
                connection,
                self._ssl_context,
                server_side=True,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
            )
        except (TimeoutError, OSError, ssl.SSLError, ConnectionError) as exc:
            log.warning(
                "TLS handshake with %s on listener %s failed: %s", peer, spec.name, exc or "timeout"
            )
            transport.abort()
            self._connections.discard(connection)
            return
        if tls is None:  # the peer went away during the handshake
            transport.abort()
            self._connections.discard(connection)
            return
        if not spec.protocol.uses_sasl:
            principal = self._certificate_principal(tls, peer, spec)
            if principal is None:
                tls.abort()
                self._connections.discard(connection)
                return
            connection.principal = principal
        connection.connection_made(tls)

    def _certificate_principal(
        self, transport: asyncio.BaseTransport, peer: str, spec: ListenerSpec
    ) -> str | None:
        """`User:<mapped subject>` of a verified client certificate, `User:ANONYMOUS` without
        one, None (after one log line) when no mapping rule applies."""
        from onceflow.broker.connection import ANONYMOUS
        from onceflow.broker.tls import NoMatchingRuleError, subject_dn

        ssl_object = transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert() if ssl_object is not None else None
        if not certificate:
            return ANONYMOUS
        try:
            return "User:" + self._principal_mapper.name(subject_dn(certificate))
        except NoMatchingRuleError as exc:
            log.warning("closing TLS connection from %s on listener %s: %s", peer, spec.name, exc)
            return None

    async def _run_periodic(self) -> None:
        """Retention every log.retention.check.interval.ms, recovery points every
        log.flush.offset.checkpoint.interval.ms, producer-id expiry every
        producer.id.expiration.check.interval.ms, interval flushes every second."""
        state = self.state
        logs = state.logs
        loop = asyncio.get_running_loop()
        retention_every = logs.retention_check_interval_ms / 1000
        checkpoint_every = logs.checkpoint_interval_ms / 1000
        expiration_every = self.config.producer_id_expiration_check_interval_ms / 1000
        next_retention = loop.time() + retention_every
        next_checkpoint = loop.time() + checkpoint_every
        next_expiration = loop.time() + expiration_every
        while True:
            await asyncio.sleep(min(1.0, retention_every, checkpoint_every, expiration_every))
            now = loop.time()
            try:
                state.committer.flush_due(logs.all_logs())
                if now >= next_expiration:
                    next_expiration = now + expiration_every
                    state.expire_producers()
                if now >= next_retention:
                    next_retention = now + retention_every
                    logs.delete_old_segments()  # moved log starts wake fetches (offsets events)
                if now >= next_checkpoint:
                    next_checkpoint = now + checkpoint_every
                    await loop.run_in_executor(None, logs.checkpoint_recovery_points)
            except OSError:
                log.exception("periodic log maintenance failed")

    async def stop(self) -> None:
        """Stop accepting, finish in-flight requests, close connections, close the logs."""
        for server in self._servers:
            server.close()
        if self.metrics_server is not None:
            await self.metrics_server.stop()
            self.metrics_server = None
        if self._periodic is not None:
            self._periodic.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._periodic
            self._periodic = None
        state = self.state
        if state is not None:
            state.begin_stop()
        connections = list(self._connections)
        for connection in connections:
            connection.begin_drain()
        if connections:
            waits = [asyncio.ensure_future(c.idle.wait()) for c in connections]
            done, pending = await asyncio.wait(waits, timeout=DRAIN_TIMEOUT_S)
            for waiter in pending:
                waiter.cancel()
            for connection in connections:
                if not connection.idle.is_set():
                    log.warning("connection from %s did not drain; aborting", connection.peer)
                    connection.abort()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)
        self._servers = []
        if state is not None:
            await state.close()
            self.state = None


class _TlsAcceptor(asyncio.Protocol):
    """The protocol of an accepted socket on a TLS listener until `start_tls` takes it over: it
    stops reading at once (so no byte reaches anything before the TLS layer) and starts the
    handshake."""

    def __init__(self, broker: Broker, connection: BrokerConnection, spec: ListenerSpec):
        self._broker = broker
        self._connection = connection
        self._spec = spec
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.pause_reading()  # type: ignore[attr-defined]
        self._task = asyncio.ensure_future(
            self._broker._start_tls(transport, self._connection, self._spec)  # type: ignore[arg-type]
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._broker._connections.discard(self._connection)
