"""The consumer's I/O-thread loop: offset resets (ListOffsets) and fetches (Fetch).

Each pass: fail requests past their deadline, refresh metadata when due, look up offsets for
partitions whose position must be reset (auto.offset.reset, seek to beginning/end), and send
one Fetch per leader that has none in flight, for every fetchable partition — so while the
application works through one response, the next is already on its way (at most two
responses buffered per partition). Responses go to `SubscriptionState.completed` as raw
`CompletedFetch`es; records are decoded by `poll` in the application thread.

Errors per partition: OFFSET_OUT_OF_RANGE resets the position by auto.offset.reset (or, with
"none", is raised by `poll`); NOT_LEADER_OR_FOLLOWER and its kin refresh metadata and retry;
other non-retriable errors are raised by `poll`. A node whose Fetch failed as a whole (no
answer, or a top-level error) gets no Fetch for `retry.backoff.ms`, doubled per consecutive
failure up to `retry.backoff.max.ms` with +/-20% jitter (KIP-580); a failed ListOffsets waits
the same way, per node. An answer resets the node's count.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

from onceflow.client.config import ClientConfig
from onceflow.client.consumer.completed_fetch import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    CompletedFetch,
)
from onceflow.client.consumer.subscription import PartitionState, SubscriptionState
from onceflow.client.errors import (
    BrokerResponseError,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    UnsupportedVersionError,
    error_for_code,
)
from onceflow.client.net.backoff import FailureBackoff, retry_backoff
from onceflow.client.net.io_thread import IOThread
from onceflow.client.net.metadata import STALE_METADATA, Cluster
from onceflow.client.net.network import AsyncBrokerConnection, NetworkClient
from onceflow.client.net.tasks import BackgroundTasks
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode, error_name
from onceflow.protocol.messages.fetch import FetchRequest, FetchResponse
from onceflow.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse

__all__ = ["Fetcher"]

log = logging.getLogger(__name__)
_FETCH_TOPIC_ID_VERSION = 13  # Fetch v13+ names topics by id only
_RESET_TIMESTAMPS = {"earliest": -2, "latest": -1}
_ListedOffset = ListOffsetsResponse.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
_TRANSPORT_ERRORS = (OSError, KafkaTimeoutError, BrokerResponseError, UnsupportedVersionError)


def _retriable(code: int) -> bool:
    known = ErrorCode.of(code)
    return isinstance(known, ErrorCode) and known.retriable


class Fetcher:
    """Owns the consumer's I/O loop (run as `IOThread`'s main coroutine)."""

    def __init__(self, config: ClientConfig, network: NetworkClient, subs: SubscriptionState):
        self.config = config
        self.network = network
        self.metadata = network.metadata
        self.subs = subs
        self.isolation_level = (
            READ_COMMITTED if config["isolation.level"] == "read_committed" else READ_UNCOMMITTED
        )
        self.check_crcs = config["check.crcs"]
        self.max_wait_ms = config["fetch.max.wait.ms"]
        self.min_bytes = config["fetch.min.bytes"]
        self.max_bytes = config["fetch.max.bytes"]
        self.partition_max_bytes = config["max.partition.fetch.bytes"]
        self.request_timeout_s = config["request.timeout.ms"] / 1000
        self.retry_backoff_s: float = config["retry.backoff.ms"] / 1000
        self.fetch_backoff = FailureBackoff(retry_backoff(config))  # per node
        self.list_offsets_backoff = FailureBackoff(retry_backoff(config))  # per node
        self.running = True
        self.io: IOThread | None = None
        self._nodes_in_flight: set[int] = set()
        self._node_backoff: dict[int, float] = {}  # node id -> no fetch before
        self.tasks = BackgroundTasks(log)

    async def run(self, io: IOThread) -> None:
        self.io = io
        self.network.wakeup = io.wake_event
        while self.running:
            try:
                delay = self.run_once()
            except Exception:
                log.exception("consumer fetcher pass failed")
                delay = self.retry_backoff_s
            await io.wait(delay)
        self.network.close()

    def run_once(self) -> float:
        self.network.check_timeouts()
        delay = self.network.maybe_refresh_metadata()
        self.reset_offsets()
        self.send_fetches()
        return min(delay, self.retry_backoff_s)

    def _wake(self) -> None:
        if self.io is not None and self.io.wake_event is not None:
            self.io.wake_event.set()

    def _leader_of(self, cluster: Cluster, tp: TopicPartition) -> int | None:
        """The leader of `tp`, or None after asking for fresh metadata of its topic."""
        leader = cluster.leader_for(tp)
        if leader is None:
            self.metadata.add_topics([tp.topic])
            self.metadata.request_update()
        return leader

    # ------------------------------------------------------------------ fetch

    def send_fetches(self) -> None:
        cluster = self.metadata.cluster
        now = time.monotonic()
        by_node: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        with self.subs.lock:
            for tp, state in self.subs.assignment.items():
                position = state.fetch_position
                if not state.fetchable or position is None:  # fetchable: a position is known
                    continue
                leader = self._leader_of(cluster, tp)
                if leader is None:
                    continue
                if leader in self._nodes_in_flight or self._node_backoff.get(leader, 0) > now:
                    continue
                by_node.setdefault(leader, []).append((tp, position, state.generation))
        for node, partitions in by_node.items():
            conn = self.network.connection(node)
            if conn is None:
                continue
            self._send_fetch(node, conn, partitions)

    def _send_fetch(
        self,
        node: int,
        conn: AsyncBrokerConnection,
        partitions: list[tuple[TopicPartition, int, int]],
    ) -> None:
        cls = FetchRequest
        version = conn.api_version(ApiKey.FETCH)
        cluster = self.metadata.cluster
        ids = None
        if version >= _FETCH_TOPIC_ID_VERSION:
            ids = cluster.topic_ids(tp.topic for tp, _o, _g in partitions)
            if ids is None:
                version = _FETCH_TOPIC_ID_VERSION - 1
        topics: dict[str, list[Any]] = {}
        for tp, offset, _generation in partitions:
            topics.setdefault(tp.topic, []).append(
                cls.FetchTopic.FetchPartition(
                    partition=tp.partition,
                    fetch_offset=offset,
                    partition_max_bytes=self.partition_max_bytes,
                )
            )
        fetch_topics = [
            cls.FetchTopic(topic_id=ids[name], partitions=parts)
            if ids is not None
            else cls.FetchTopic(topic=name, partitions=parts)
            for name, parts in topics.items()
        ]
        request = cls(
            replica_id=-1,
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,  # no fetch session (KIP-227): a full fetch every time
            topics=fetch_topics,
        )
        with self.subs.lock:
            for tp, _offset, _generation in partitions:
                self.subs.assignment[tp].fetch_in_flight = True
        self._nodes_in_flight.add(node)
        future = conn.send(
            request, version, timeout_s=self.request_timeout_s + self.max_wait_ms / 1000
        )
        future.add_done_callback(lambda f: self._on_fetch(f, node, partitions, version))

    def _on_fetch(
        self,
        future: asyncio.Future[Any],
        node: int,
        partitions: list[tuple[TopicPartition, int, int]],
        version: int,
    ) -> None:
        self._nodes_in_flight.discard(node)
        try:
            response = future.result()
        except _TRANSPORT_ERRORS as exc:
            log.debug("fetch from node %d failed: %s", node, exc)
            self._node_backoff[node] = time.monotonic() + self.fetch_backoff.failed(node)
            self.metadata.request_update()
            response = None
        sent = {tp: (offset, generation) for tp, offset, generation in partitions}
        data: dict[TopicPartition, Any] = {}
        if response is not None:
            if response.error_code:
                log.info("fetch from node %d: %s", node, error_name(response.error_code))
                self._node_backoff[node] = time.monotonic() + self.fetch_backoff.failed(node)
            else:
                self.fetch_backoff.succeeded(node)
            names = self.metadata.cluster.topic_names
            for topic in response.responses:
                name = (
                    topic.topic if version < _FETCH_TOPIC_ID_VERSION else names.get(topic.topic_id)
                )
                if name is None:  # a topic id this client does not know: nothing asked for it
                    continue
                for p in topic.partitions:
                    data[TopicPartition(name, p.partition_index)] = p
        with self.subs.lock:
            for tp, (offset, generation) in sent.items():
                state = self.subs.assignment.get(tp)
                if state is None:
                    continue
                state.fetch_in_flight = False
                p = data.get(tp)
                if p is None or state.generation != generation or state.fetch_position != offset:
                    continue  # no answer, or the application sought meanwhile
                self._apply_partition(tp, state, offset, generation, p)
            self.subs.changed.notify_all()
        self._wake()

    def _apply_partition(
        self,
        tp: TopicPartition,
        state: PartitionState,
        offset: int,
        generation: int,
        p: FetchResponse.FetchableTopicResponse.PartitionData,
    ) -> None:
        code = p.error_code
        if code == ErrorCode.NONE:
            state.high_watermark = p.high_watermark
            state.last_stable_offset = p.last_stable_offset
            state.log_start_offset = p.log_start_offset
            aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or ()]
            fetch = CompletedFetch(
                tp.topic,
                tp.partition,
                offset,
                p.records,
                isolation_level=self.isolation_level,
                aborted_transactions=aborted,
                check_crcs=self.check_crcs,
                high_watermark=p.high_watermark,
                last_stable_offset=p.last_stable_offset,
                log_start_offset=p.log_start_offset,
            )
            next_offset = fetch.last_fetched_offset
            if next_offset > offset:
                state.fetch_position = next_offset
                state.buffered += 1
                self.subs.completed.append((fetch, generation))
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            strategy = self.subs.default_reset
            if strategy == "none":
                state.error = OffsetOutOfRangeError(
                    f"Fetch position FetchPosition{{offset={offset}}} is out of range for "
                    f"partition {tp.topic}-{tp.partition}"
                )
            else:
                log.info(
                    "fetch offset %d out of range for %s; resetting to %s", offset, tp, strategy
                )
                state.request_reset(strategy)
            return
        known = ErrorCode.of(code)
        if known in STALE_METADATA or known == ErrorCode.OFFSET_NOT_AVAILABLE:
            self.metadata.request_update()
            return
        if isinstance(known, ErrorCode) and known.retriable:
            return
        state.error = error_for_code(code, f"fetching {tp.topic}-{tp.partition}")

    # ------------------------------------------------------------------ offset resets

    def reset_offsets(self) -> None:
        cluster = self.metadata.cluster
        by_node: dict[int, list[tuple[TopicPartition, str, int]]] = {}
        with self.subs.lock:
            for tp, state in self.subs.assignment.items():
                if state.position is not None or state.reset_in_flight or state.error:
                    continue
                strategy = state.reset_strategy
                if strategy is None or strategy == "none":
                    continue
                leader = self._leader_of(cluster, tp)
                if leader is None:
                    continue
                by_node.setdefault(leader, []).append((tp, strategy, state.generation))
        for node, partitions in by_node.items():
            conn = self.network.connection(node)
            if conn is not None:
                self.tasks.spawn(
                    self._list_offsets(conn, partitions),
                    "ListOffsets",
                    functools.partial(self._list_offsets_crashed, partitions),
                )

    def _list_offsets_crashed(
        self, partitions: list[tuple[TopicPartition, str, int]], exc: BaseException
    ) -> None:
        """The offset-reset task raised unexpectedly: the partitions are no longer waiting for
        it, and the next poll raises the error."""
        error = KafkaError(f"resetting offsets failed unexpectedly: {exc!r}")
        error.__cause__ = exc
        with self.subs.lock:
            for tp, _strategy, _generation in partitions:
                state = self.subs.assignment.get(tp)
                if state is not None:
                    state.reset_in_flight = False
                    state.error = error
            self.subs.changed.notify_all()
        self._wake()

    async def _list_offsets(
        self, conn: AsyncBrokerConnection, partitions: list[tuple[TopicPartition, str, int]]
    ) -> None:
        cls = ListOffsetsRequest
        topics: dict[str, list[Any]] = {}
        for tp, strategy, _generation in partitions:
            topics.setdefault(tp.topic, []).append(
                cls.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=tp.partition, timestamp=_RESET_TIMESTAMPS[strategy]
                )
            )
        request = cls(
            replica_id=-1,
            isolation_level=self.isolation_level,
            topics=[cls.ListOffsetsTopic(name=n, partitions=ps) for n, ps in topics.items()],
        )
        with self.subs.lock:
            for tp, _s, _g in partitions:
                if tp in self.subs.assignment:
                    self.subs.assignment[tp].reset_in_flight = True
        offsets: dict[TopicPartition, _ListedOffset] = {}
        try:
            response = await conn.send(request, timeout_s=self.request_timeout_s)
            for topic in response.topics:
                for listed in topic.partitions:
                    offsets[TopicPartition(topic.name, listed.partition_index)] = listed
            self.list_offsets_backoff.succeeded(conn.node_id)
        except _TRANSPORT_ERRORS as exc:
            log.debug("ListOffsets failed: %s", exc)
            await asyncio.sleep(self.list_offsets_backoff.failed(conn.node_id))
        with self.subs.lock:
            for tp, _strategy, generation in partitions:
                state = self.subs.assignment.get(tp)
                if state is None:
                    continue
                state.reset_in_flight = False
                p = offsets.get(tp)
                if p is None or state.generation != generation:
                    continue
                if p.error_code == ErrorCode.NONE and p.offset >= 0:
                    state.seek(p.offset)
                elif ErrorCode.of(p.error_code) in STALE_METADATA:
                    self.metadata.request_update()
                elif not _retriable(p.error_code):
                    state.error = error_for_code(p.error_code, f"ListOffsets {tp}")
            self.subs.changed.notify_all()
        self._wake()
