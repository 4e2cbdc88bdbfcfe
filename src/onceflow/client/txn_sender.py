"""The transactional producer's coordinator I/O, on the producer's I/O thread.

`TxnRequestSender.run_once` takes the next request from `TxnManager.next_request` (one in
flight at a time, in priority order), builds the Kafka request for it, sends it on the
coordinator's own connection (FindCoordinator on any broker's), and hands the answer's error
codes and data back to the manager, which decides what follows. A lost connection or a
timeout is `on_transport_error`: the coordinator is looked up again and the request retried.

Each request runs in a task this sender owns (`tasks.BackgroundTasks`). One that fails with
an unexpected exception (a bug, not a transport error) would leave the request in flight and
the producer silently stalled; instead the failure is logged and the manager moves to
FATAL_ERROR with it, so the waiting call and every later one raise it.

`find_coordinator` is shared with the consumer's group coordinator client.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from onceflow.client.accumulator import RecordAccumulator
from onceflow.client.errors import (
    BrokerResponseError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from onceflow.client.network import AsyncBrokerConnection, NetworkClient
from onceflow.client.tasks import BackgroundTasks
from onceflow.client.txn_manager import TxnManager
from onceflow.client.txn_requests import (
    END_TXN_TV1_MAX,
    TXN_OFFSET_COMMIT_TV1_MAX,
    TxnRequest,
    TxnRequestKind,
)
from onceflow.protocol import messages
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode

__all__ = ["TxnRequestSender", "find_coordinator"]

log = logging.getLogger(__name__)
_K = TxnRequestKind
_TRANSPORT_ERRORS = (OSError, KafkaTimeoutError, BrokerResponseError)
_BATCHED_FIND_VERSION = 4  # FindCoordinator v4+ takes a list of keys (KIP-699)
_ADD_PARTITIONS_CLIENT_MAX = 3  # v4+ is the brokers' batched verification form (KIP-890)


async def find_coordinator(
    conn: AsyncBrokerConnection, key_type: int, key: str, timeout_s: float
) -> tuple[int, int, str, int]:
    """FindCoordinator for one key: (error code, node id, host, port)."""
    cls = messages.REQUESTS[ApiKey.FIND_COORDINATOR]
    version = conn.api_version(ApiKey.FIND_COORDINATOR, max_version=5)
    if version >= _BATCHED_FIND_VERSION:
        request = cls(key_type=key_type, coordinator_keys=[key])
    else:
        request = cls(key=key, key_type=key_type)
    response = await conn.send(request, version, timeout_s=timeout_s)
    if version >= _BATCHED_FIND_VERSION:
        if not response.coordinators:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1
        c = response.coordinators[0]
        return c.error_code, c.node_id, c.host, c.port
    return response.error_code, response.node_id, response.host, response.port


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

    def _crashed(self, request: TxnRequest, exc: BaseException) -> None:
        """`request`'s task raised unexpectedly: fail it and the producer with the error."""
        error = KafkaError(f"{request.kind.name} failed unexpectedly: {exc!r}")
        error.__cause__ = exc
        with self.txn.lock:
            if self.txn.in_flight is request:
                self.txn.in_flight = None
            self.txn.transition_to_fatal(error)
            request.result.complete(error)
        self._wake()

    async def _send(self, request: TxnRequest) -> None:
        try:
            conn = await self._connection(request)
            codes, fields = await self._exchange(conn, request)
        except UnsupportedVersionError as exc:
            with self.txn.lock:
                self.txn.in_flight = None
                self.txn.transition_to_fatal(exc)
                request.result.complete(exc)
        except _TRANSPORT_ERRORS as exc:
            log.debug("%s failed: %s", request.kind.name, exc)
            self.txn.on_transport_error(request, time.monotonic())
        else:
            failed = {k: c for k, c in codes.items() if c != ErrorCode.NONE}
            if failed:
                log.debug("%s answered %s", request.kind.name, failed)
            self.txn.on_response(request, time.monotonic(), codes, **fields)
        finally:
            self._wake()

    async def _connection(self, request: TxnRequest) -> AsyncBrokerConnection:
        key = self.txn.target(request)
        if key is None:
            return await self.network.any_connection()
        node_id, host, port = self.txn.coordinators[key]
        return await self.network.coordinator_connection(key[0], node_id, host, port)

    async def _exchange(
        self, conn: AsyncBrokerConnection, request: TxnRequest
    ) -> tuple[dict[Any, int], dict[str, Any]]:
        txn = self.txn
        kind = request.kind
        timeout = self.request_timeout_s
        if kind is _K.FIND_COORDINATOR:
            code, node_id, host, port = await find_coordinator(conn, *request.data, timeout)
            return {None: code}, {"node_id": node_id, "host": host, "port": port}
        if kind is _K.INIT_PRODUCER_ID:
            cls = messages.REQUESTS[ApiKey.INIT_PRODUCER_ID]
            version = conn.api_version(ApiKey.INIT_PRODUCER_ID, max_version=5)
            message = cls(
                transactional_id=txn.transactional_id,
                transaction_timeout_ms=txn.transaction_timeout_ms,
            )
            if version >= 3:
                message.producer_id, message.producer_epoch = request.data
            response = await conn.send(message, version, timeout_s=timeout)
            fields = {
                "producer_id": response.producer_id,
                "producer_epoch": response.producer_epoch,
            }
            return {None: response.error_code}, fields
        if kind is _K.ADD_PARTITIONS_TO_TXN:
            return await self._add_partitions(conn, request, timeout), {}
        if kind is _K.ADD_OFFSETS_TO_TXN:
            cls = messages.REQUESTS[ApiKey.ADD_OFFSETS_TO_TXN]
            message = cls(
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                group_id=request.data[0].group_id,
            )
            response = await conn.send(message, timeout_s=timeout)
            return {None: response.error_code}, {}
        if kind is _K.TXN_OFFSET_COMMIT:
            return await self._txn_offset_commit(conn, request, timeout), {}
        cls = messages.REQUESTS[ApiKey.END_TXN]
        message = cls(
            transactional_id=txn.transactional_id,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            committed=request.data,
        )
        version = conn.api_version(ApiKey.END_TXN, END_TXN_TV1_MAX)
        response = await conn.send(message, version, timeout_s=timeout)
        return {None: response.error_code}, {}

    async def _add_partitions(
        self, conn: AsyncBrokerConnection, request: TxnRequest, timeout: float
    ) -> dict[Any, int]:
        cls = messages.REQUESTS[ApiKey.ADD_PARTITIONS_TO_TXN]
        version = conn.api_version(ApiKey.ADD_PARTITIONS_TO_TXN, _ADD_PARTITIONS_CLIENT_MAX)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(request.data):
            by_topic.setdefault(topic, []).append(partition)
        message = cls(
            v3_and_below_transactional_id=self.txn.transactional_id,
            v3_and_below_producer_id=self.txn.producer_id,
            v3_and_below_producer_epoch=self.txn.producer_epoch,
            v3_and_below_topics=[
                cls.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()
            ],
        )
        response = await conn.send(message, version, timeout_s=timeout)
        codes: dict[Any, int] = dict.fromkeys(request.data, int(ErrorCode.UNKNOWN_SERVER_ERROR))
        for topic in response.results_by_topic_v3_and_below:
            for p in topic.results_by_partition:
                codes[(topic.name, p.partition_index)] = p.partition_error_code
        return codes

    async def _txn_offset_commit(
        self, conn: AsyncBrokerConnection, request: TxnRequest, timeout: float
    ) -> dict[Any, int]:
        group, offsets = request.data
        cls = messages.REQUESTS[ApiKey.TXN_OFFSET_COMMIT]
        topic_cls = cls.TxnOffsetCommitRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), committed in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(
                topic_cls.TxnOffsetCommitRequestPartition(
                    partition_index=partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        message = cls(
            transactional_id=self.txn.transactional_id,
            group_id=group.group_id,
            producer_id=self.txn.producer_id,
            producer_epoch=self.txn.producer_epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        version = conn.api_version(ApiKey.TXN_OFFSET_COMMIT, TXN_OFFSET_COMMIT_TV1_MAX)
        response = await conn.send(message, version, timeout_s=timeout)
        codes: dict[Any, int] = dict.fromkeys(offsets, int(ErrorCode.UNKNOWN_SERVER_ERROR))
        for topic in response.topics:
            for p in topic.partitions:
                codes[(topic.name, p.partition_index)] = p.error_code
        return codes
