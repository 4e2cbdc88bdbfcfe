"""`Broker`: the asyncio TCP server tying connections, handlers and the data directory together.

`await start()` loads the data directory (recovering logs after a crash, rebuilding producer
state from snapshots plus the log), binds the listener (`SO_REUSEADDR`, so a restarted broker
can take its old port back at once), binds the optional metrics listener
(`onceflow.metrics.listener`, see `broker.metrics`) and starts the periodic task: retention
every `log.retention.check.interval.ms`, recovery-point checkpoints every
`log.flush.offset.checkpoint.interval.ms`, idle producer-id expiry every
`producer.id.expiration.check.interval.ms`, interval flushes every second (the task wakes at
least once a second, so shorter intervals act as one second). `await stop()` stops accepting, lets
in-flight requests finish and their responses go out (bounded by a timeout), closes every
connection, then flushes, fsyncs and closes every log and marks the shutdown clean.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from onceflow.broker.config import BrokerConfig, Listener
from onceflow.broker.connection import BrokerConnection
from onceflow.broker.metrics import MetricsServer
from onceflow.broker.state import BrokerState

log = logging.getLogger("onceflow.broker.server")

DRAIN_TIMEOUT_S = 10.0


class Broker:
    """A single-node Kafka-compatible broker."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.state: BrokerState | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[BrokerConnection] = set()
        self._periodic: asyncio.Task[None] | None = None
        self.bound: Listener | None = None
        self.metrics_server: MetricsServer | None = None

    @property
    def bound_address(self) -> str:
        """`HOST:PORT` actually bound (valid after `start`)."""
        return str(self.bound)

    async def start(self) -> None:
        """Open the data directory, bind the listener, start background tasks."""
        config = self.config
        listener = config.listener
        loop = asyncio.get_running_loop()
        state = await loop.run_in_executor(None, BrokerState.open, config)
        self.state = state
        state.load_coordinators()
        # after the groups: finishing prepared transactions may write __consumer_offsets markers
        await state.transactions.start()
        self._server = await loop.create_server(
            self._new_connection,
            listener.host,
            listener.port,
            reuse_address=True,
            backlog=1024,
        )
        sockname = self._server.sockets[0].getsockname()
        self.bound = Listener(listener.host, sockname[1])
        if config.advertised_listener is None:
            state.advertised = self.bound
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

    def _new_connection(self) -> BrokerConnection:
        connection = BrokerConnection(self.state, on_close=self._connections.discard)
        self._connections.add(connection)
        return connection

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
        if self._server is not None:
            self._server.close()
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
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
        if state is not None:
            await state.close()
            self.state = None
