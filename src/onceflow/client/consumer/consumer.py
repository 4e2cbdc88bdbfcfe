"""`Consumer`: Kafka's consumer with manual assignment, a synchronous API and an I/O thread.

    with Consumer({"bootstrap.servers": "127.0.0.1:9092", "auto.offset.reset": "earliest"}) as c:
        c.assign([TopicPartition("events", 0), ("events", 1, 42)])   # (topic, partition[, offset])
        for record in c.poll(timeout=1.0):                          # a list, maybe empty
            print(record.offset, record.key, record.value)

`poll(timeout)` returns a list of up to `max.poll.records` `ConsumerRecord`s, like Kafka's Java
`poll` (flattened) and kafka-python; an empty list means nothing arrived in time. Errors are
raised from `poll`: `OffsetOutOfRangeError` with auto.offset.reset=none, corrupt data,
other non-retriable fetch errors, and `TopicAuthorizationFailedError` while the metadata
answer refuses a subscribed topic (Java's TopicAuthorizationException). Positions without an
offset start at auto.offset.reset (`latest` by default, as in Kafka); offsets -2 and -1 mean
beginning and end (confluent-kafka's OFFSET_BEGINNING / OFFSET_END). Fetching runs on the I/O
thread: while the application processes one response, the next fetch is already in flight.

With `group.id`, `subscribe(topics, on_assign, on_revoke)` joins the consumer group (classic
protocol, eager rebalancing, `partition.assignment.strategy` range or roundrobin): `poll`
joins and rejoins as needed, a partition starts at the group's committed offset (else at
auto.offset.reset), a heartbeat task keeps the membership, and `close` leaves the group.
`commit`, `committed` and enable.auto.commit work with subscribed and assigned partitions;
`consumer_group_metadata()` is what `Producer.send_offsets_to_transaction` takes.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from onceflow.client.consumer.completed_fetch import CompletedFetch, ConsumerRecord, FetchedColumns
from onceflow.client.consumer.config import consumer_config
from onceflow.client.consumer.fetcher import Fetcher
from onceflow.client.consumer.group.coordinator import ConsumerCoordinator
from onceflow.client.consumer.group.membership import Callback, ConsumerMembership
from onceflow.client.consumer.subscription import SubscriptionState
from onceflow.client.errors import (
    ConfigException,
    IllegalStateError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
)
from onceflow.client.net.io_thread import IOThread
from onceflow.client.net.metadata import Metadata
from onceflow.client.net.network import NetworkClient
from onceflow.client.offsets import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    Offsets,
    normalize_offsets,
)
from onceflow.common import TopicPartition

__all__ = [
    "Consumer",
    "ConsumerRecord",
    "FetchedColumns",
    "PartitionRef",
    "PartitionSpec",
    "TopicPartition",
]

log = logging.getLogger(__name__)
_ids = itertools.count(1)


# (fetch, max records) -> (items for the caller, how many records they hold)
_I = TypeVar("_I", ConsumerRecord, FetchedColumns)
_Take = Callable[[CompletedFetch, int], tuple[list[_I], int]]


def _take_records(fetch: CompletedFetch, limit: int) -> tuple[list[ConsumerRecord], int]:
    records = fetch.take(limit)
    return records, len(records)


def _take_columns(fetch: CompletedFetch, limit: int) -> tuple[list[FetchedColumns], int]:
    columns = fetch.take_columns(limit)
    n = len(columns.offsets)
    return ([columns] if n else []), n


class PartitionRef(Protocol):
    """A partition named by attributes (confluent-kafka's TopicPartition, with an optional
    `offset`)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


# what the partition arguments accept: (topic, partition[, offset]) tuples or a PartitionRef
# (onceflow's TopicPartition is both)
PartitionSpec = TopicPartition | tuple[str, int] | tuple[str, int, int] | PartitionRef


def _normalize(item: PartitionSpec) -> tuple[TopicPartition, int | None]:
    """TopicPartition / admin TopicPartition / (topic, partition[, offset]) -> (tp, offset)."""
    if isinstance(item, tuple) and not isinstance(item, TopicPartition):
        if len(item) == 3:
            return TopicPartition(str(item[0]), int(item[1])), int(item[2])
        if len(item) == 2:
            return TopicPartition(str(item[0]), int(item[1])), None
        raise ValueError(f"expected (topic, partition[, offset]), got {item!r}")
    offset = getattr(item, "offset", None)
    if offset is not None and offset < -2:  # confluent's OFFSET_INVALID (-1001) etc: unset
        offset = None
    return TopicPartition(item.topic, int(item.partition)), offset


class Consumer:
    """A Kafka consumer for manually assigned partitions (not thread-safe, as in Kafka)."""

    def __init__(self, config: Mapping[str, Any]):
        self.config = consumer_config(config)
        self.client_id = self.config["client.id"] or f"consumer-{next(_ids)}"
        self.max_poll_records = self.config["max.poll.records"]
        self.default_api_timeout_s = self.config["default.api.timeout.ms"] / 1000
        self.metadata = Metadata(
            self.config["metadata.max.age.ms"],
            self.config["retry.backoff.ms"],
            self.config["retry.backoff.max.ms"],
        )
        self.network = NetworkClient(self.config, self.metadata)
        self.network.client_id = self.client_id
        self.subscriptions = SubscriptionState(self.config["auto.offset.reset"])
        self.network.on_auth_error = self._wake_waiters
        self._fetcher = Fetcher(self.config, self.network, self.subscriptions)
        self._io = IOThread(
            f"onceflow-consumer-network-thread | {self.client_id}", self._fetcher.run
        )
        self._closed = False
        self._io.start()
        self._group: ConsumerMembership | None = None
        if self.config["group.id"] is not None:
            coordinator = ConsumerCoordinator(self.config, self.network)
            self._group = ConsumerMembership(
                self, coordinator, self._io, self.subscriptions, self.config
            )

    # ------------------------------------------------------------------ groups

    def _require_group(self) -> ConsumerMembership:
        self._check_open()
        if self._group is None:
            raise ConfigException(
                "To use the group management or offset commit APIs, you must provide a valid "
                "group.id in the consumer configuration."
            )
        return self._group

    def subscribe(
        self,
        topics: Iterable[str],
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
    ) -> None:
        """Join the group for `topics`; the partitions come from the group's leader.
        `on_assign(consumer, partitions)` / `on_revoke(consumer, partitions)` run inside
        `poll` around each rebalance."""
        group = self._require_group()
        topics = [topics] if isinstance(topics, str) else list(topics)
        if group.subscription is None and self.subscriptions.assignment:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        self.metadata.add_topics(topics)
        group.subscribe(topics, on_assign, on_revoke)
        self._io.wakeup()

    def unsubscribe(self) -> None:
        """Revoke the partitions and leave the group."""
        if self._group is not None and self._group.subscription is not None:
            self._group.unsubscribe()

    def subscription(self) -> set[str]:
        return set(self._group.subscription or ()) if self._group is not None else set()

    def commit(
        self,
        offsets: Offsets | None = None,
        asynchronous: bool = False,
        timeout: float | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """Commit offsets to the group: the positions of every assigned partition when
        `offsets` is None (each the next record to read), else a mapping `TopicPartition ->
        offset | OffsetAndMetadata` or `(topic, partition, offset)` items. Synchronous by
        default (returns what was committed, raises `CommitFailedError` when the group
        rebalanced meanwhile); `asynchronous=True` returns at once."""
        group = self._require_group()
        normalized = None if offsets is None else normalize_offsets(offsets)
        timeout = self.default_api_timeout_s if timeout is None else timeout
        return group.commit(normalized, asynchronous, timeout)

    def committed(
        self, partitions: Iterable[PartitionSpec], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None when none). With
        isolation.level=read_committed, offsets of a pending transaction are waited for."""
        group = self._require_group()
        tps = [_normalize(p)[0] for p in partitions]
        timeout = self.default_api_timeout_s if timeout is None else timeout
        return group.committed(tps, timeout)

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group id, generation, member id and instance id, for
        `Producer.send_offsets_to_transaction` (KIP-447 fencing)."""
        return self._require_group().group_metadata()

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions: Iterable[PartitionSpec]) -> None:
        """Replace the assignment. Items: `TopicPartition`, `(topic, partition)` or
        `(topic, partition, offset)`; a partition already assigned keeps its position, a new
        one without an offset starts at the group's committed offset when the consumer has a
        group.id (else, or when nothing is committed, at auto.offset.reset)."""
        self._check_open()
        if self._group is not None and self._group.subscription is not None:
            raise IllegalStateError(
                "Subscription to topics, partitions and pattern are mutually exclusive"
            )
        positions = dict(_normalize(item) for item in partitions)
        self.subscriptions.assign(positions, use_committed=self._group is not None)
        if self.metadata.add_topics(tp.topic for tp in positions):
            self.metadata.request_update()
        self._io.wakeup()

    def unassign(self) -> None:
        self.assign([])

    def assignment(self) -> set[TopicPartition]:
        return set(self.subscriptions.assignment)

    def seek(self, partition: PartitionSpec, offset: int | None = None) -> None:
        """Set the next offset to read (-2: beginning, -1: end). Accepts a TopicPartition with
        an offset attribute (confluent-kafka style) when `offset` is None."""
        self._check_open()
        tp, tp_offset = _normalize(partition)
        target = offset if offset is not None else tp_offset
        if target is None:
            raise ValueError("seek needs an offset")
        self.subscriptions.seek(tp, target)
        self._io.wakeup()

    def seek_to_beginning(self, partitions: Iterable[PartitionSpec] | None = None) -> None:
        for tp in self._targets(partitions):
            self.subscriptions.seek(tp, -2)
        self._io.wakeup()

    def seek_to_end(self, partitions: Iterable[PartitionSpec] | None = None) -> None:
        for tp in self._targets(partitions):
            self.subscriptions.seek(tp, -1)
        self._io.wakeup()

    def _targets(self, partitions: Iterable[PartitionSpec] | None) -> list[TopicPartition]:
        self._check_open()
        if partitions is None:
            return list(self.subscriptions.assignment)
        return [_normalize(p)[0] for p in partitions]

    def pause(self, partitions: Iterable[PartitionSpec]) -> None:
        with self.subscriptions.lock:
            for tp in self._targets(partitions):
                self.subscriptions.state(tp).paused = True

    def resume(self, partitions: Iterable[PartitionSpec]) -> None:
        with self.subscriptions.lock:
            for tp in self._targets(partitions):
                self.subscriptions.state(tp).paused = False
        self._io.wakeup()

    def position(self, partition: PartitionSpec, timeout: float | None = None) -> int:
        """The offset of the next record `poll` returns for the partition, resolving
        auto.offset.reset first if needed (bounded by `timeout`, default.api.timeout.ms)."""
        self._check_open()
        tp = _normalize(partition)[0]
        timeout = self.default_api_timeout_s if timeout is None else timeout
        deadline = time.monotonic() + timeout
        subs = self.subscriptions
        if self._group is not None:
            self._group.update_positions(deadline)
        with subs.lock:
            while True:
                state = subs.state(tp)
                if state.position is not None:
                    return state.position
                self._raise_partition_error(tp, state)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"Timeout of {timeout * 1000:.0f}ms expired before the position for "
                        f"partition {tp.topic}-{tp.partition} could be determined"
                    )
                self._io.wakeup()
                subs.changed.wait(remaining)

    def _raise_partition_error(self, tp: TopicPartition, state: Any) -> None:
        if state.awaiting_committed:
            return
        if state.error is not None:
            error, state.error = state.error, None
            raise error
        if state.position is None and state.reset_strategy in (None, "none"):
            raise OffsetOutOfRangeError(
                f"Undefined offset with no reset policy for partitions: [{tp.topic}-{tp.partition}]"
            )

    def _wake_waiters(self) -> None:
        """A login failed (I/O thread): wake `poll`, which raises the error."""
        with self.subscriptions.lock:
            self.subscriptions.changed.notify_all()

    # ------------------------------------------------------------------ polling

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records fetched for the assigned partitions, waiting up to `timeout` seconds for
        some; at most `max_records` (default max.poll.records)."""
        return self._poll(timeout, max_records, _take_records)

    def poll_columns(
        self, timeout: float = 0.0, max_records: int | None = None
    ) -> list[FetchedColumns]:
        """onceflow extension: `poll` for bulk readers that build columns. The same records,
        in the same order and with the same positions, as one `FetchedColumns` (parallel lists
        of offsets, timestamps, keys, values, headers) per run of one partition's records,
        instead of one `ConsumerRecord` per record. Whole record batches are handed out, so a
        call may return up to one batch more than `max_records`."""
        return self._poll(timeout, max_records, _take_columns)

    def _poll(self, timeout: float, max_records: int | None, take: _Take[_I]) -> list[_I]:
        self._check_open()
        group = self._group
        if not self.subscriptions.assignment and (group is None or group.subscription is None):
            raise IllegalStateError(
                "Consumer is not subscribed to any topics or assigned any partitions"
            )
        limit = max_records or self.max_poll_records
        deadline = time.monotonic() + max(timeout, 0.0)
        subs = self.subscriptions
        self.metadata.raise_auth_error()
        if group is not None:
            if group.subscription is not None:
                self.metadata.raise_unauthorized(group.subscription)
            if group.subscription is not None and not group.ensure_active_group(deadline):
                return []
            group.update_positions(deadline)
            group.maybe_auto_commit()
        self._io.wakeup()
        while True:
            out = self._drain(limit, take)
            if out:
                self._io.wakeup()
                return out
            with subs.lock:
                for tp, state in subs.assignment.items():
                    self._raise_partition_error(tp, state)
                self.metadata.raise_auth_error()
                if subs.completed:
                    continue
                if (
                    group is not None
                    and group.subscription is not None
                    and group.coordinator.rejoin_needed
                ):
                    return []
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return []
                subs.changed.wait(remaining)

    def _drain(self, limit: int, take: _Take[_I]) -> list[_I]:
        """Take up to `limit` records from the buffered fetches, advancing positions."""
        subs = self.subscriptions
        out: list[_I] = []
        count = 0
        while count < limit:
            with subs.lock:
                if not subs.completed:
                    break
                fetch, generation = subs.completed[0]
                tp = TopicPartition(fetch.topic, fetch.partition)
                state = subs.assignment.get(tp)
                if state is None or state.generation != generation or state.position is None:
                    subs.completed.popleft()
                    continue
                if fetch.next_offset < state.position:
                    fetch.next_offset = state.position
            taken, n = take(fetch, limit - count)  # decode outside the lock
            with subs.lock:
                if state.generation == generation:
                    state.position = fetch.next_offset
                    out.extend(taken)
                    count += n
                    if fetch.exhausted:
                        subs.completed.popleft()
                        state.buffered -= 1
                elif subs.completed and subs.completed[0][0] is fetch:
                    subs.completed.popleft()
        return out

    # ------------------------------------------------------------------ offsets and metadata

    def partitions_for_topic(self, topic: str, timeout: float | None = None) -> list[int]:
        """The topic's partition indexes."""
        timeout = self.default_api_timeout_s if timeout is None else timeout
        self.metadata.wait_for_topic(topic, timeout, self._io.wakeup)
        return sorted(self.metadata.cluster.topics[topic].partitions)

    def highwater(self, partition: PartitionSpec) -> int:
        """The high watermark from the last fetch of the partition (-1 before one)."""
        tp = _normalize(partition)[0]
        with self.subscriptions.lock:
            return self.subscriptions.state(tp).high_watermark

    # ------------------------------------------------------------------ lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    def close(self, timeout: float | None = None) -> None:
        """Stop fetching and the I/O thread."""
        if self._closed:
            return
        if self._group is not None:
            self._group.close(self.default_api_timeout_s if timeout is None else timeout)
        self._closed = True
        self._fetcher.running = False
        self._io.wakeup()
        if not self._io.join(30 if timeout is None else timeout):
            log.warning("consumer I/O thread did not stop in time")

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
