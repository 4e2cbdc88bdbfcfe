"""Cluster metadata as a client sees it: brokers, partition leaders, topic ids.

`Cluster` is an immutable snapshot built from a Metadata response. `Metadata` holds the current
snapshot, the topics the client needs, and when to refresh: on request (after
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, an unknown leader) or every
`metadata.max.age.ms`, never sooner than the backoff after the last attempt (KIP-580:
`retry.backoff.ms`, doubled per consecutive failed refresh up to `retry.backoff.max.ms`, with
+/-20% jitter). Application threads wait on it for a topic's partitions
(`wait_for_topic`); the I/O thread applies responses (`update`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Final, NamedTuple

from onceflow.client.errors import KafkaTimeoutError, error_for_code
from onceflow.client.net.backoff import ExponentialBackoff, FailureBackoff
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.metadata import MetadataResponse

__all__ = [
    "STALE_METADATA",
    "BrokerNode",
    "Cluster",
    "Metadata",
    "PartitionInfo",
    "TopicInfo",
]

ZERO_UUID = uuid.UUID(int=0)

# errors that mean our metadata is stale (Kafka's InvalidMetadataException family)
STALE_METADATA: Final[frozenset[ErrorCode]] = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
    }
)


class BrokerNode(NamedTuple):
    """A broker as Metadata names it."""

    node_id: int
    host: str
    port: int


class PartitionInfo(NamedTuple):
    """One partition: its leader (-1 when none) and leader epoch."""

    partition: int
    leader: int
    leader_epoch: int
    error_code: int


class TopicInfo(NamedTuple):
    """One topic: error code (NONE when known), topic id (None before Metadata v10),
    partitions by index."""

    name: str
    error_code: int
    topic_id: uuid.UUID | None
    partitions: dict[int, PartitionInfo]

    @property
    def available_partitions(self) -> list[int]:
        """Partitions that have a leader."""
        return [p.partition for p in self.partitions.values() if p.leader >= 0]


class Cluster:
    """An immutable metadata snapshot."""

    def __init__(
        self,
        brokers: dict[int, BrokerNode] | None = None,
        topics: dict[str, TopicInfo] | None = None,
        controller_id: int = -1,
        cluster_id: str | None = None,
    ) -> None:
        self.brokers = brokers or {}
        self.topics = topics or {}
        self.controller_id = controller_id
        self.cluster_id = cluster_id
        self.topic_names = {t.topic_id: t.name for t in self.topics.values() if t.topic_id}

    @classmethod
    def from_response(cls, response: MetadataResponse) -> Cluster:
        """Build a snapshot from a decoded MetadataResponse."""
        brokers = {b.node_id: BrokerNode(b.node_id, b.host, b.port) for b in response.brokers}
        topics = {}
        for topic in response.topics:
            if topic.name is None:
                continue
            partitions = {
                p.partition_index: PartitionInfo(
                    p.partition_index, p.leader_id, p.leader_epoch, p.error_code
                )
                for p in topic.partitions
            }
            topic_id = None if topic.topic_id == ZERO_UUID else topic.topic_id
            topics[topic.name] = TopicInfo(topic.name, topic.error_code, topic_id, partitions)
        return cls(
            brokers,
            topics,
            response.controller_id,
            getattr(response, "cluster_id", None),
        )

    def leader_for(self, tp: tuple[str, int]) -> int | None:
        """The leader's node id, or None when unknown or leaderless."""
        topic = self.topics.get(tp[0])
        if topic is None:
            return None
        partition = topic.partitions.get(tp[1])
        if partition is None or partition.leader < 0 or partition.leader not in self.brokers:
            return None
        return partition.leader

    def partition_count(self, topic: str) -> int | None:
        info = self.topics.get(topic)
        if info is None or info.error_code != ErrorCode.NONE or not info.partitions:
            return None
        return len(info.partitions)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        info = self.topics.get(topic)
        return info.topic_id if info is not None else None

    def topic_ids(self, topics: Iterable[str]) -> dict[str, uuid.UUID] | None:
        """The ids of `topics`; None when one of them has no known id (a request must then
        name topics, not ids)."""
        ids = {}
        for name in topics:
            topic_id = self.topic_id(name)
            if topic_id is None:
                return None
            ids[name] = topic_id
        return ids


class Metadata:
    """The current `Cluster`, the topics wanted, and the refresh schedule (thread-safe)."""

    def __init__(
        self, max_age_ms: int, retry_backoff_ms: int, retry_backoff_max_ms: int | None = None
    ):
        self.max_age_ms = max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        # consecutive failed refreshes; a refresh that works starts the count again
        self.failures = FailureBackoff(ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms))
        self.backoff_s = self.failures.backoff.backoff_s(0)  # the wait after the latest attempt
        self.cluster = Cluster()
        self.version = 0
        self.wanted: set[str] = set()
        self.need_update = True
        self.last_refresh = 0.0
        self.last_attempt = 0.0
        self.last_failure = 0.0
        self.new_topics = False  # a topic was added since the last refresh
        self.last_error: BaseException | None = None
        self.auth_error: BaseException | None = None  # a failed SASL login, until one works
        self._changed = threading.Condition()

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track more topics; True when one was new (an update is then requested)."""
        with self._changed:
            new = set(topics) - self.wanted
            if new:
                self.wanted |= new
                self.need_update = self.new_topics = True
            return bool(new)

    def request_update(self) -> None:
        """Ask for a refresh at the next opportunity."""
        self.need_update = True

    def time_to_next_update(self, now: float) -> float:
        """Seconds until a refresh is due (0 when due now), honouring the backoff after any
        attempt (retry.backoff.ms, doubling per consecutive failure up to
        retry.backoff.max.ms), except that a topic new since the last refresh waits only for
        the backoff after a failed attempt (a producer's first send to a topic should not sit
        out the backoff of the bootstrap refresh it had nothing to do with)."""
        since = self.last_failure if self.new_topics else self.last_attempt
        backoff = since + self.backoff_s - now
        if self.need_update:
            return max(backoff, 0.0)
        return max(self.last_refresh + self.max_age_ms / 1000 - now, backoff, 0.0)

    def update(self, cluster: Cluster, now: float) -> None:
        """Install a new snapshot and wake the waiters."""
        with self._changed:
            self.cluster = cluster
            self.version += 1
            self.last_refresh = self.last_attempt = now
            self.failures.succeeded()
            self.backoff_s = self.failures.backoff.backoff_s(0)
            self.last_error = self.auth_error = None
            self.new_topics = False
            self.need_update = any(
                topic in cluster.topics
                and cluster.topics[topic].error_code == ErrorCode.LEADER_NOT_AVAILABLE
                for topic in self.wanted
            )
            self._changed.notify_all()

    def failed_update(self, error: BaseException, now: float) -> None:
        """A refresh attempt failed; the next one waits longer after each consecutive
        failure."""
        with self._changed:
            self.last_attempt = self.last_failure = now
            self.backoff_s = self.failures.failed()
            self.last_error = error
            self._changed.notify_all()

    def authentication_failed(self, error: BaseException, now: float) -> None:
        """A connection failed to authenticate: waiters raise `error` until a refresh works."""
        with self._changed:
            self.auth_error = error
        self.failed_update(error, now)

    def raise_auth_error(self) -> None:
        """Raise the authentication error, if the last login failed."""
        error = self.auth_error
        if error is not None:
            raise error

    def raise_unauthorized(self, topics: Iterable[str]) -> None:
        """Raise TOPIC_AUTHORIZATION_FAILED naming those of `topics` the last metadata answer
        refused, as Kafka's consumer does for its subscription (until a refresh allows them)."""
        topics_info = self.cluster.topics
        denied = sorted(
            topic
            for topic in topics
            if topic in topics_info
            and topics_info[topic].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
        if denied:
            raise error_for_code(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Not authorized to access topics: {denied}"
            )

    def wait_for_topic(
        self, topic: str, timeout_s: float, request_update: Callable[[], None]
    ) -> int:
        """Block until `topic` has partitions; returns the count. `request_update()` asks the
        I/O thread for a refresh. Raises the topic's error or `KafkaTimeoutError`."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                count = self.cluster.partition_count(topic)
                if count is not None:
                    return count
                self.raise_auth_error()
                info = self.cluster.topics.get(topic)
                if info is not None and info.error_code not in (
                    ErrorCode.NONE,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ErrorCode.LEADER_NOT_AVAILABLE,
                ):
                    raise error_for_code(info.error_code, topic)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if info is not None and info.error_code != ErrorCode.NONE:
                        raise KafkaTimeoutError(
                            f"Topic {topic} not present in metadata after "
                            f"{timeout_s * 1000:.0f} ms ({ErrorCode(info.error_code).name})."
                        )
                    raise KafkaTimeoutError(
                        f"Topic {topic} not present in metadata after {timeout_s * 1000:.0f} ms."
                    )
                if topic not in self.wanted:
                    self.wanted.add(topic)
                    self.new_topics = True
                self.need_update = True
                request_update()
                self._changed.wait(min(remaining, 0.1))
