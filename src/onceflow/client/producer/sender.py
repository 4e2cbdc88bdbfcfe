"""The producer's sender: the I/O-thread loop that turns accumulated batches into Produce
requests and their answers into delivery results.

Each pass (Kafka's `Sender.runOnce`): fail requests past request.timeout.ms, refresh metadata
when due, obtain a producer id when idempotence needs one (InitProducerId, also for KIP-360
epoch bumps), expire batches past delivery.timeout.ms, then drain ready batches — one Produce
request per leader, at most `max.in.flight.requests.per.connection` in flight per connection —
and sleep until woken (a new or full batch, an answer, a connection) or the next linger
deadline. Answers are applied as they arrive: success completes the batch's future; retriable
errors re-enqueue it (and refresh metadata for NOT_LEADER_OR_FOLLOWER and its kin); with
idempotence, `TransactionManager` decides per error code. A batch's retries (the
accumulator's) and InitProducerId's wait `retry.backoff.ms`, doubled per further failure up to
`retry.backoff.max.ms`, with +/-20% jitter (KIP-580).

With a transactional id, each pass also runs the coordinator requests (`TxnRequestSender`):
batches go out only for partitions already added to the transaction; while a commit is under
way every batch is sent at once (a flush), and EndTxn waits until all are resolved; while the
transaction is aborting, or must be, queued batches are failed instead of sent. A failed
batch puts the transaction in ABORTABLE_ERROR.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from onceflow.client.config import ClientConfig
from onceflow.client.errors import (
    BrokerResponseError,
    KafkaError,
    KafkaTimeoutError,
    OutOfOrderSequenceError,
    TransactionAbortedError,
    UnsupportedVersionError,
    error_for_code,
)
from onceflow.client.net.backoff import FailureBackoff, retry_backoff
from onceflow.client.net.io_thread import IOThread
from onceflow.client.net.metadata import STALE_METADATA
from onceflow.client.net.network import AsyncBrokerConnection, NetworkClient
from onceflow.client.net.tasks import BackgroundTasks
from onceflow.client.producer.accumulator import ProducerBatch, RecordAccumulator, now_ms
from onceflow.client.producer.idempotence import ProduceAction, TransactionManager
from onceflow.client.producer.states import ProducerState
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.client.producer.txn.requests import PRODUCE_TV1_MAX
from onceflow.client.producer.txn.sender import TxnRequestSender
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode, error_name
from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest
from onceflow.protocol.messages.produce import ProduceRequest, ProduceResponse

__all__ = ["Sender"]

log = logging.getLogger(__name__)
_E = ErrorCode

# non-idempotent producer: the action per error class (retriable codes retry)
PLAIN_ACTIONS: Final[Mapping[int, ProduceAction]] = MappingProxyType(
    {_E.NONE: ProduceAction.COMPLETE, _E.DUPLICATE_SEQUENCE_NUMBER: ProduceAction.COMPLETE}
)
_PRODUCE_TOPIC_ID_VERSION = 13  # Produce v13+ names topics by id only
_PartitionData = ProduceRequest.TopicProduceData.PartitionProduceData
_PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse


class Sender:
    """Owns the producer's I/O loop (run as `IOThread`'s main coroutine)."""

    def __init__(
        self,
        config: ClientConfig,
        accumulator: RecordAccumulator,
        network: NetworkClient,
        txn: TransactionManager | None,
    ) -> None:
        self.config = config
        self.accumulator = accumulator
        self.network = network
        self.metadata = network.metadata
        self.txn = txn
        self.acks = config["acks"]
        self.retries = config["retries"]
        self.max_in_flight = config["max.in.flight.requests.per.connection"]
        self.max_request_size = config["max.request.size"]
        self.request_timeout_ms = config["request.timeout.ms"]
        self.delivery_timeout_ms = config["delivery.timeout.ms"]
        self.retry_backoff_s = config["retry.backoff.ms"] / 1000
        self.init_backoff = FailureBackoff(retry_backoff(config))  # InitProducerId retries
        self.running = True
        self.force_close = False
        self.io: IOThread | None = None
        self._init_not_before = 0.0
        self._commit_flushing = False
        self.txn_sender: TxnRequestSender | None = None
        self.txn_manager = txn if isinstance(txn, TxnManager) else None  # transactional
        self.tasks = BackgroundTasks(log)
        if self.txn_manager is not None:
            self.txn_sender = TxnRequestSender(
                self.txn_manager, network, accumulator, self.request_timeout_ms, self._wake
            )

    # ------------------------------------------------------------------ loop

    async def run(self, io: IOThread) -> None:
        """The main loop; returns once closed and every batch is resolved (or forced)."""
        self.io = io
        self.network.wakeup = io.wake_event
        while True:
            if not self.running:
                if self.force_close or not self.accumulator.has_incomplete():
                    break
            try:
                delay = self.run_once()
            except Exception:  # a bug must not kill the producer's I/O thread silently
                log.exception("producer sender pass failed")
                delay = self.retry_backoff_s
            await io.wait(delay)
        self.fail_everything(KafkaError("Producer is closed forcefully."))
        self.network.close()

    def run_once(self) -> float:
        """One pass; returns seconds to sleep unless woken."""
        self.network.check_timeouts()
        delay = self.network.maybe_refresh_metadata()
        txn = self.txn
        if txn is not None:
            if txn.is_fatal:
                self.fail_everything(self._fatal_error(txn))
                return delay
            if self.txn_sender is not None and self.txn_manager is not None:
                self.maybe_complete_transaction(self.txn_manager)
                delay = min(delay, self.txn_sender.run_once())
            else:
                self.maybe_init_producer_id(txn)
                if not txn.has_producer_id or txn.epoch_bump_required:
                    delay = min(delay, max(self._init_not_before - time.monotonic(), 0.005))
        self.expire_batches()
        return min(delay, self.send_produce_data())

    def maybe_complete_transaction(self, txn: TxnManager) -> None:
        """Flush everything while committing; drop queued batches when aborting."""
        committing = txn.state is ProducerState.COMMITTING_TRANSACTION
        if committing and not self._commit_flushing:
            self.accumulator.begin_flush()
            self._commit_flushing = True
        elif not committing and self._commit_flushing:
            self.accumulator.end_flush()
            self._commit_flushing = False
        if txn.must_drop_batches and self.accumulator.has_undrained():
            error = txn.last_error if txn.state is ProducerState.ABORTABLE_ERROR else None
            for batch in self.accumulator.remove_all():
                self.fail(
                    batch,
                    error or TransactionAbortedError("Failing batch since transaction was aborted"),
                )

    def send_produce_data(self) -> float:
        cluster = self.metadata.cluster
        now = now_ms()
        check = self.accumulator.ready(now, cluster.leader_for)
        if check.unknown_leader_topics:
            self.metadata.add_topics(check.unknown_leader_topics)
            self.metadata.request_update()
        connections = {}
        for node in check.nodes:
            conn = self.network.connection(node)
            if conn is not None and conn.in_flight < self.max_in_flight:
                connections[node] = conn
        if connections:
            by_node: dict[int, list[tuple[str, int]]] = {}
            for tp in self.accumulator.queued_partitions():
                leader = cluster.leader_for(tp)
                if leader in connections:
                    by_node.setdefault(leader, []).append(tp)
            prepare = self.txn.may_send if self.txn is not None else _always
            drained = self.accumulator.drain(by_node, self.max_request_size, now, prepare)
            for node, batches in drained.items():
                self.send_produce_request(connections[node], batches)
        return check.next_delay_ms / 1000

    # ------------------------------------------------------------------ produce

    def send_produce_request(
        self, conn: AsyncBrokerConnection, batches: list[ProducerBatch]
    ) -> None:
        cls = ProduceRequest
        in_transaction = self.txn is not None and self.txn.transactional_id is not None
        version = conn.api_version(ApiKey.PRODUCE, PRODUCE_TV1_MAX if in_transaction else None)
        cluster = self.metadata.cluster
        ids = None
        if version >= _PRODUCE_TOPIC_ID_VERSION:
            ids = cluster.topic_ids(b.tp[0] for b in batches)
            if ids is None:
                version = _PRODUCE_TOPIC_ID_VERSION - 1
        by_topic: dict[str, list[_PartitionData]] = {}
        for batch in batches:
            by_topic.setdefault(batch.tp[0], []).append(
                cls.TopicProduceData.PartitionProduceData(index=batch.tp[1], records=batch.buffer)
            )
            if self.txn is not None:
                self.txn.mark_sent(batch)
            else:
                batch.outstanding = True
        topic_data = []
        for topic, partitions in by_topic.items():
            if ids is not None:
                item = cls.TopicProduceData(topic_id=ids[topic], partition_data=partitions)
            else:
                item = cls.TopicProduceData(name=topic, partition_data=partitions)
            topic_data.append(item)
        request = cls(
            transactional_id=self.txn.transactional_id if self.txn is not None else None,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=topic_data,
        )
        future = conn.send(
            request,
            version,
            timeout_s=self.request_timeout_ms / 1000,
            expect_response=self.acks != 0,
        )
        future.add_done_callback(lambda f: self.on_produce_response(f, batches, version))

    def on_produce_response(
        self, future: asyncio.Future[Any], batches: list[ProducerBatch], version: int
    ) -> None:
        """Apply a Produce answer (or its transport failure) to each batch."""
        try:
            response: ProduceResponse | None = future.result()
        except (OSError, KafkaTimeoutError, BrokerResponseError) as exc:
            code = _E.REQUEST_TIMED_OUT if isinstance(exc, TimeoutError) else _E.NETWORK_EXCEPTION
            log.debug("produce to %d partitions failed: %s", len(batches), exc)
            for batch in batches:
                self.handle_batch(batch, code, -1, -1, str(exc))
            self._wake()
            return
        if response is None:  # acks=0
            for batch in batches:
                self.handle_batch(batch, _E.NONE, -1, -1, None)
            self._wake()
            return
        results: dict[tuple[str | None, int], _PartitionResponse] = {}
        names = self.metadata.cluster.topic_names
        for topic in response.responses:
            name = topic.name if version < _PRODUCE_TOPIC_ID_VERSION else names.get(topic.topic_id)
            for answer in topic.partition_responses:
                results[(name, answer.index)] = answer
        for batch in batches:
            p = results.get(batch.tp)
            if p is None:
                self.handle_batch(
                    batch, _E.UNKNOWN_SERVER_ERROR, -1, -1, "partition missing from response"
                )
            else:
                self.handle_batch(
                    batch, p.error_code, p.base_offset, p.log_append_time_ms, p.error_message
                )
        self._wake()

    def handle_batch(
        self,
        batch: ProducerBatch,
        code: int,
        base_offset: int,
        append_time: int,
        message: str | None,
    ) -> None:
        """Complete, retry or fail one batch according to its partition's error code."""
        failed: tuple[ProducerBatch, ...] = (batch,)
        if batch.done:  # failed already (forced close, a sequence error ahead of it)
            if self.txn is not None:
                self.txn.mark_answered(batch)
            batch.outstanding = False
            return
        if self.txn is not None:
            self.txn.mark_answered(batch)
            decision = self.txn.handle_produce_error(batch, code)
            action, failed = decision.action, decision.failed or failed
        else:
            batch.outstanding = False
            plain = PLAIN_ACTIONS.get(code)
            if plain is not None:
                action = plain
            else:
                known = ErrorCode.of(code)
                retriable = isinstance(known, ErrorCode) and known.retriable
                action = ProduceAction.RETRY if retriable else ProduceAction.FAIL
        if code in STALE_METADATA:
            self.metadata.request_update()
        if action is ProduceAction.IGNORE:
            return
        if action is ProduceAction.COMPLETE:
            self.complete(batch, base_offset, append_time, None)
        elif action in (ProduceAction.RETRY, ProduceAction.RETRY_AFTER_BUMP):
            if self.can_retry(batch):
                log.debug("retrying %s after %s", batch, error_name(code))
                self.accumulator.reenqueue(batch, now_ms())
            else:
                self.fail(batch, error_for_code(code, message))
        elif action is ProduceAction.FAIL_WITH_FOLLOWERS:
            for failed_batch in failed:
                error = OutOfOrderSequenceError(
                    f"The broker received an out of order sequence number for {batch.tp[0]}-"
                    f"{batch.tp[1]} at sequence {batch.base_sequence}; "
                    f"batch with sequence {failed_batch.base_sequence} failed with it"
                )
                if self.txn_manager is not None:
                    self.txn_manager.handle_failed_batch(failed_batch, error)
                self.complete(failed_batch, -1, -1, error)
        elif action is ProduceAction.FATAL:
            fatal = self._fatal_error(self.txn)
            self.complete(batch, -1, -1, fatal)
            self.fail_everything(fatal)
        else:
            self.fail(batch, error_for_code(code, message))

    def can_retry(self, batch: ProducerBatch) -> bool:
        return (
            (self.running or not self.force_close)
            and batch.attempts < self.retries
            and now_ms() - batch.created_ms < self.delivery_timeout_ms
        )

    def complete(
        self, batch: ProducerBatch, base_offset: int, append_time: int, error: BaseException | None
    ) -> None:
        batch.result.complete(base_offset, append_time, error)
        self.accumulator.deallocate(batch)

    def fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self.txn is not None:
            self.txn.fail_batch(batch)
        if self.txn_manager is not None:
            self.txn_manager.handle_failed_batch(batch, error)
        self.complete(batch, -1, -1, error)

    def fail_everything(self, error: BaseException) -> None:
        """Fail every queued batch (fatal error or forced close)."""
        for batch in self.accumulator.remove_all():
            self.fail(batch, error)
        if self.force_close or (self.txn is not None and self.txn.is_fatal):
            for batch in self.accumulator.incomplete():
                if not batch.outstanding or self.force_close:
                    self.fail(batch, error)

    def expire_batches(self) -> None:
        now = now_ms()
        for batch in self.accumulator.expired_batches(now, self.delivery_timeout_ms):
            self.fail(
                batch,
                KafkaTimeoutError(
                    f"Expiring {batch.record_count} record(s) for {batch.tp[0]}-{batch.tp[1]}: "
                    f"{now - batch.created_ms} ms has passed since batch creation"
                ),
            )

    # ------------------------------------------------------------------ producer id

    def maybe_init_producer_id(self, txn: TransactionManager) -> None:
        if time.monotonic() < self._init_not_before:
            return
        plan = txn.prepare_init_producer_id()
        if plan is not None:
            self.tasks.spawn(
                self._init_producer_id(txn, plan.producer_id, plan.producer_epoch),
                "InitProducerId",
                lambda exc: self._init_producer_id_crashed(txn, exc),
            )

    def _init_producer_id_crashed(self, txn: TransactionManager, exc: BaseException) -> None:
        """The InitProducerId task raised unexpectedly: the producer fails with the error
        (every later send raises it) instead of waiting for an id forever."""
        error = KafkaError(f"InitProducerId failed unexpectedly: {exc!r}")
        error.__cause__ = exc
        txn.fail_init_producer_id()
        txn.transition_to_fatal(error)
        self._wake()

    async def _init_producer_id(
        self, txn: TransactionManager, producer_id: int, producer_epoch: int
    ) -> None:
        retry = True
        try:
            conn = await self.network.any_connection()
            if not conn.supports(ApiKey.INIT_PRODUCER_ID):
                txn.fail_init_producer_id()
                txn.transition_to_fatal(
                    UnsupportedVersionError(
                        "The broker does not support InitProducerId, which the idempotent "
                        "producer needs; set enable.idempotence=false"
                    )
                )
                return
            cls = InitProducerIdRequest
            version = conn.api_version(ApiKey.INIT_PRODUCER_ID)
            request = cls(
                transactional_id=None, transaction_timeout_ms=self.config["transaction.timeout.ms"]
            )
            if version >= 3:  # KIP-360: bump the current epoch
                request.producer_id, request.producer_epoch = producer_id, producer_epoch
            response = await conn.send(request, version, timeout_s=self.request_timeout_ms / 1000)
            retry = txn.complete_init_producer_id(
                response.error_code, response.producer_id, response.producer_epoch
            )
            if not retry and not txn.is_fatal:
                log.info("producer id %d, epoch %d", txn.producer_id, txn.producer_epoch)
        except (OSError, KafkaTimeoutError, BrokerResponseError) as exc:
            log.debug("InitProducerId failed: %s", exc)
            txn.fail_init_producer_id()
        finally:
            if retry and not txn.is_fatal:
                self._init_not_before = time.monotonic() + self.init_backoff.failed()
            elif not retry:
                self.init_backoff.succeeded()
            self._wake()

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _fatal_error(txn: TransactionManager | None) -> BaseException:
        """The error that made the idempotence manager fatal (a FATAL action or state comes
        only from it)."""
        error = txn.last_error if txn is not None else None
        return error or KafkaError("the producer is in a fatal state")

    def _wake(self) -> None:
        if self.io is not None and self.io.wake_event is not None:
            self.io.wake_event.set()

    def stop(self, force: bool) -> None:
        """Ask the loop to finish (thread-safe via `IOThread.call_soon`)."""
        self.running = False
        self.force_close = self.force_close or force
        self._wake()


def _always(_batch: ProducerBatch) -> bool:
    return True
