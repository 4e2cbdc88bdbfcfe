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

TLS (SSL and SASL_SSL listeners): the broker accepts the sockets itself and hands each to
`loop.connect_accepted_socket` with the TLS context, so that a failed handshake (plaintext on a
TLS port, an untrusted or missing client certificate, an old protocol, a stall past
`TLS_HANDSHAKE_TIMEOUT_S`) raises here and becomes one warning line naming the peer and
listener, and the socket is closed (asyncio's own server would drop it silently). The
connection starts once the handshake is done; on an SSL listener its principal is the client
certificate's (`broker.tls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import ssl
from typing import TYPE_CHECKING

from onceflow.broker.config import BrokerConfig
from onceflow.broker.connection import ClientConnection, TlsClientConnection
from onceflow.broker.listeners import Listener, ListenerSpec, SecurityProtocol
from onceflow.broker.metrics import MetricsServer
from onceflow.broker.state import BrokerState
from onceflow.security.oauthbearer import TokenValidator

if TYPE_CHECKING:
    from onceflow.broker.tls import PrincipalMapper

log = logging.getLogger("onceflow.broker.server")

DRAIN_TIMEOUT_S = 10.0
TLS_HANDSHAKE_TIMEOUT_S = 10.0


class Broker:
    """A single-node Kafka-compatible broker."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.state: BrokerState | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._tls_sockets: list[socket.socket] = []
        self._tls_acceptors: list[asyncio.Task[None]] = []
        self._handshakes: set[asyncio.Task[None]] = set()
        self._connections: set[ClientConnection] = set()
        self._periodic: asyncio.Task[None] | None = None
        self._cleaner_task: asyncio.Task[None] | None = None
        self.bound: Listener | None = None  # the first listener's
        self.bound_listeners: dict[str, Listener] = {}
        self._ssl_context: ssl.SSLContext | None = None
        self._principal_mapper: PrincipalMapper | None = None  # with a TLS listener
        self._token_validator: TokenValidator | None = None  # OAUTHBEARER's, shared
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
        if "OAUTHBEARER" in config.sasl_enabled_mechanisms:
            from onceflow.security.jwt import token_validator

            self._token_validator = token_validator(config.get)
        loop = asyncio.get_running_loop()
        state = await loop.run_in_executor(None, BrokerState.open, config)
        self.state = state
        state.load_coordinators()
        # after the groups: finishing prepared transactions may write __consumer_offsets markers
        await state.transactions.start()
        for spec in listeners:
            if spec.protocol.uses_tls:
                sock = socket.create_server((spec.bind.host, spec.bind.port), backlog=1024)
                sock.setblocking(False)
                self._tls_sockets.append(sock)
                self._tls_acceptors.append(loop.create_task(self._serve_tls(sock, spec)))
                port = sock.getsockname()[1]
            else:
                server = await loop.create_server(
                    functools.partial(self._new_connection, spec),
                    spec.bind.host,
                    spec.bind.port,
                    reuse_address=True,
                    backlog=1024,
                )
                self._servers.append(server)
                port = server.sockets[0].getsockname()[1]
            bound = Listener(spec.bind.host, port)
            self.bound_listeners[spec.name] = bound
            state.advertised_by_listener[spec.name] = spec.advertised or bound
            log.info("listener %s (%s) on %s", spec.name, spec.protocol.value, bound)
        self.bound = self.bound_listeners[listeners[0].name]
        state.advertised = state.advertised_by_listener[listeners[0].name]
        if config.metrics_listener is not None:
            self.metrics_server = MetricsServer(state.metrics, state)
            await self.metrics_server.start(config.metrics_listener)
        self._periodic = loop.create_task(self._run_periodic())
        cleaner = state.logs.cleaner
        self._cleaner_task = loop.create_task(cleaner.run()) if cleaner is not None else None
        log.info(
            "broker %d listening on %s (advertised %s), cluster id %s, data dir %s",
            state.node_id,
            self.bound,
            state.advertised,
            state.cluster_id,
            config.data_dir,
        )

    def _started_state(self) -> BrokerState:
        """The broker's state, which `start` opens before anything can use it."""
        if self.state is None:
            raise RuntimeError("the broker is not started")
        return self.state

    def _new_connection(self, spec: ListenerSpec) -> ClientConnection:
        authenticator = None
        if spec.protocol.uses_sasl:
            from onceflow.broker.sasl_authenticator import SaslAuthenticator

            config = self.config
            authenticator = SaslAuthenticator(
                self._started_state().credential_store(),
                config.sasl_enabled_mechanisms,
                config.get("connections.max.reauth.ms"),
                token_validator=self._token_validator,
            )
        principal_of = None
        if spec.protocol is SecurityProtocol.SSL:
            principal_of = self._certificate_principal
        connection_class = TlsClientConnection if spec.protocol.uses_tls else ClientConnection
        connection = connection_class(
            self._started_state(),
            on_close=self._connections.discard,
            listener_name=spec.name,
            authenticator=authenticator,
            principal_of=principal_of,
        )
        self._connections.add(connection)
        return connection

    async def _serve_tls(self, sock: socket.socket, spec: ListenerSpec) -> None:
        """Accept on a TLS listener; each socket's handshake runs in its own task."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                client, address = await loop.sock_accept(sock)
            except OSError as exc:
                log.warning("accept on listener %s failed: %s", spec.name, exc)
                await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._start_tls(client, address, spec))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)

    async def _start_tls(self, client: socket.socket, address: object, spec: ListenerSpec) -> None:
        """The TLS handshake of one accepted socket; a failure is one log line and a close."""
        peer = f"{address[0]}:{address[1]}" if isinstance(address, tuple) else "?"
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: self._new_connection(spec),
                client,
                ssl=self._ssl_context,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S,
            )
        except (TimeoutError, OSError) as exc:
            log.warning(
                "TLS handshake with %s on listener %s failed: %s", peer, spec.name, exc or "timeout"
            )
            client.close()

    def _certificate_principal(self, transport: asyncio.BaseTransport) -> str:
        """`User:<mapped subject>` of a verified client certificate, `User:ANONYMOUS` without
        one; raises NoMatchingRuleError when no mapping rule applies."""
        from onceflow.broker.context import ANONYMOUS
        from onceflow.broker.tls import subject_dn

        ssl_object = transport.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert() if ssl_object is not None else None
        if not certificate:
            return ANONYMOUS
        mapper = self._principal_mapper
        if mapper is None:  # set by start() whenever a listener uses TLS
            raise RuntimeError("a client certificate on a broker without TLS listeners")
        return "User:" + mapper.name(subject_dn(certificate))

    async def _run_periodic(self) -> None:
        """Retention every log.retention.check.interval.ms, recovery points every
        log.flush.offset.checkpoint.interval.ms, producer-id expiry every
        producer.id.expiration.check.interval.ms, interval flushes every second."""
        state = self._started_state()
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
        for acceptor in [*self._tls_acceptors, *self._handshakes]:
            acceptor.cancel()
        for sock in self._tls_sockets:
            sock.close()
        self._tls_acceptors, self._tls_sockets = [], []
        if self.metrics_server is not None:
            await self.metrics_server.stop()
            self.metrics_server = None
        if self._cleaner_task is not None:
            self._cleaner_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._cleaner_task
            self._cleaner_task = None
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
