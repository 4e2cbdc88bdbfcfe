"""The transactional producer's coordinator I/O, on the producer's I/O thread.

`TxnRequestSender.run_once` takes the next request from `TxnManager.next_request` (one in
flight at a time, in priority order), has it build its Kafka request at the version both sides
support under its cap, sends that on the coordinator's own connection (FindCoordinator on any
broker's), and hands the error codes and data the request parses from the answer back to the
manager, which decides what follows. A lost connection or a
timeout is `on_transport_error`: the coordinator is looked up again and the request retried;
but when no connection could be made because the broker refused to authenticate the client
(SASL or TLS: `Metadata.auth_error`), the request and the producer fail with that error, as
Kafka's `TransactionManager.authenticationFailed` does, so `init_transactions` raises it at
once instead of timing out.

Each request runs in a task this sender owns (`tasks.BackgroundTasks`). One that fails with
an unexpected exception (a bug, not a transport error) would leave the request in flight and
the producer silently stalled; instead the failure is logged and the manager moves to
FATAL_ERROR with it, so the waiting call and every later one raise it.
"""

from __future__ import annotations

import logging
import time
from typing import Any, TypeVar

from onceflow.client.errors import (
    BrokerResponseError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from onceflow.client.net.network import AsyncBrokerConnection, NetworkClient
from onceflow.client.net.tasks import BackgroundTasks
from onceflow.client.producer.accumulator import RecordAccumulator
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.client.producer.txn.request import AnyTxnRequest, ErrorCodes, TxnRequest
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.message import Message

__all__ = ["TxnRequestSender"]

log = logging.getLogger(__name__)
_TRANSPORT_ERRORS = (OSError, KafkaTimeoutError, BrokerResponseError)
_R = TypeVar("_R", bound=Message)


class TxnRequestSender:
    """Sends `TxnManager`'s coordinator requests (use from the I/O thread only)."""

    def __init__(
        self,
        txn: TxnManager,
        network: NetworkClient,
        accumulator: RecordAccumulator,
        request_timeout_ms: int,
        wake: Any,
    ):
        self.txn = txn
        self.network = network
        self.accumulator = accumulator
        self.request_timeout_s = request_timeout_ms / 1000
        self._wake = wake
        self.tasks = BackgroundTasks(log)

    def run_once(self) -> float:
        """Send the next request if one is due; returns seconds until one may be."""
        request, delay = self.txn.next_request(time.monotonic(), self.accumulator.has_incomplete())
        if request is not None:
            self.tasks.spawn(
                self._send(request),
                f"{request.kind.name} for transactional id {self.txn.transactional_id!r}",
                lambda exc: self._crashed(request, exc),
            )
        return delay

    def _crashed(self, request: AnyTxnRequest, exc: BaseException) -> None:
        """`request`'s task raised unexpectedly: fail it and the producer with the error."""
        error = KafkaError(f"{request.kind.name} failed unexpectedly: {exc!r}")
        error.__cause__ = exc
        with self.txn.lock:
            if self.txn.in_flight is request:
                self.txn.in_flight = None
            self.txn.transition_to_fatal(error)
            request.result.complete(error)
        self._wake()

    async def _send(self, request: AnyTxnRequest) -> None:
        try:
            conn = await self._connection(request)
            codes, fields = await self._exchange(conn, request)
        except UnsupportedVersionError as exc:
            self._fail(request, exc)
        except _TRANSPORT_ERRORS as exc:
            auth_error = self.network.metadata.auth_error
            if auth_error is not None:  # not a broker that may come back: fatal, as in Kafka
                self._fail(request, auth_error)
                return
            log.debug("%s failed: %s", request.kind.name, exc)
            self.txn.on_transport_error(request, time.monotonic())
        else:
            failed = {k: c for k, c in codes.items() if c != ErrorCode.NONE}
            if failed:
                log.debug("%s answered %s", request.kind.name, failed)
            self.txn.on_response(request, time.monotonic(), codes, **fields)
        finally:
            self._wake()

    def _fail(self, request: AnyTxnRequest, error: BaseException) -> None:
        """Fail `request` and the producer with `error` (fatal)."""
        with self.txn.lock:
            self.txn.in_flight = None
            self.txn.transition_to_fatal(error)
            request.result.complete(error)

    async def _connection(self, request: AnyTxnRequest) -> AsyncBrokerConnection:
        key = self.txn.target(request)
        if key is None:
            return await self.network.any_connection()
        node_id, host, port = self.txn.coordinators[key]
        return await self.network.coordinator_connection(key[0], node_id, host, port)

    async def _exchange(
        self, conn: AsyncBrokerConnection, request: TxnRequest[_R]
    ) -> tuple[ErrorCodes, dict[str, Any]]:
        version = conn.api_version(request.API_KEY, request.MAX_VERSION)
        message = request.build(self.txn, version)
        response = await conn.send(message, version, timeout_s=self.request_timeout_s)
        return request.parse(response, version)
