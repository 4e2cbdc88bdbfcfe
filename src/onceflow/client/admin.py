"""`AdminClient`: topic administration and offset lookups over the blocking connection.

Configuration uses Kafka's property names: `bootstrap.servers` (required), `client.id`,
`request.timeout.ms`. Per Kafka's AdminClient, each call returns one result per topic or
partition; following this project's rule, a result carries its Kafka `ErrorCode` as a value
(`TopicResult.error_code`), and only I/O failures raise (`KafkaConnectionError`,
`KafkaTimeoutError`). `result.raise_for_error()` turns a result into the typed exception.

Requests go to the bootstrap broker (on a single node it is also the controller), except
ListOffsets and DeleteRecords, which go to each partition's leader as named by Metadata.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from onceflow.client import acl_admin, config_admin, group_admin, log_dirs_admin, txn_admin
from onceflow.client.acl_admin import AclResult, DeletedAcls
from onceflow.client.admin_connections import (
    COORDINATOR_MOVED,
    GROUP_KEY,
    GROUP_RETRIABLE,
    RETRY_S,
    AdminConnections,
    known_code,
    wait_retriable,
)
from onceflow.client.config_admin import AlterOp, ConfigResource, ConfigsResult
from onceflow.client.connection import BrokerConnection
from onceflow.client.errors import UnsupportedVersionError, raise_for_error
from onceflow.client.group_admin import GroupDescription, GroupListing
from onceflow.client.log_dirs_admin import LogDirDescription
from onceflow.client.net.metadata import BrokerNode
from onceflow.client.txn_admin import (
    AbortTransactionSpec,
    ProducersResult,
    TransactionDescription,
    TransactionListing,
)
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.create_partitions import CreatePartitionsRequest
from onceflow.protocol.messages.create_topics import CreateTopicsRequest
from onceflow.protocol.messages.delete_records import DeleteRecordsRequest
from onceflow.protocol.messages.delete_topics import DeleteTopicsRequest
from onceflow.protocol.messages.list_offsets import ListOffsetsRequest
from onceflow.protocol.messages.metadata import MetadataResponse
from onceflow.protocol.messages.offset_commit import OffsetCommitRequest
from onceflow.protocol.messages.offset_fetch import OffsetFetchRequest
from onceflow.security.acl import AclBinding, AclBindingFilter

_OFFSET_FETCH_SINGLE_GROUP_MAX = 7  # v8+ batches groups (KIP-709); one group is enough here

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


@dataclass(frozen=True)
class NewTopic:
    """A topic to create: Kafka's `NewTopic` (replication factor -1 means the broker default)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicResult:
    """The outcome for one topic: an error code (NONE on success) and the broker's message."""

    name: str
    error_code: ErrorCode
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code == ErrorCode.NONE

    def raise_for_error(self) -> None:
        """Raise the typed `KafkaError` unless the call succeeded."""
        raise_for_error(self.error_code, self.error_message or self.name)


@dataclass(frozen=True)
class PartitionDescription:
    """One partition as Metadata describes it."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class TopicDescription:
    """A topic as Metadata describes it (`error_code` is set for an unknown topic).
    `topic_id` is the topic's id (Metadata v10+, Kafka 2.8+); None when the broker sends
    none. A topic deleted and created again under the same name gets a new id."""

    name: str
    error_code: ErrorCode
    is_internal: bool = False
    partitions: tuple[PartitionDescription, ...] = ()
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True)
class OffsetSpec:
    """Which offset ListOffsets should find: earliest, latest, or the first at a timestamp."""

    timestamp: int

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls(EARLIEST_TIMESTAMP)

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls(LATEST_TIMESTAMP)

    @classmethod
    def for_timestamp(cls, timestamp_ms: int) -> OffsetSpec:
        if timestamp_ms < 0:
            raise ValueError("a timestamp must be >= 0")
        return cls(timestamp_ms)


@dataclass(frozen=True)
class ListOffsetsResult:
    """ListOffsets for one partition: offset -1 when no record is at or after the timestamp."""

    error_code: ErrorCode
    offset: int = -1
    timestamp: int = -1


@dataclass(frozen=True)
class DeletedRecords:
    """DeleteRecords for one partition: the new low watermark (log start offset), -1 on error."""

    error_code: ErrorCode
    low_watermark: int = -1


class AdminClient:
    """Kafka's AdminClient surface for topics and offsets, over one blocking connection."""

    def __init__(self, config: Mapping[str, Any]):
        self.config = dict(config)
        self._net = AdminConnections(self.config)
        self.bootstrap_servers = self._net.bootstrap_servers
        self.client_id = self._net.client_id
        self.request_timeout_ms = self._net.request_timeout_ms

    def close(self) -> None:
        """Close every connection."""
        self._net.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ topics

    def create_topics(
        self, new_topics: Iterable[NewTopic], validate_only: bool = False
    ) -> dict[str, TopicResult]:
        """CreateTopics; one result per topic."""
        cls = CreateTopicsRequest
        topics = [
            cls.CreatableTopic(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                assignments=[],
                configs=[
                    cls.CreatableTopic.CreatableTopicConfig(name=k, value=str(v))
                    for k, v in t.config.items()
                ],
            )
            for t in new_topics
        ]
        request = cls(
            topics=topics, timeout_ms=self.request_timeout_ms, validate_only=validate_only
        )
        response = self._net.bootstrap().send(request)
        return {
            r.name: TopicResult(r.name, known_code(r.error_code), r.error_message)
            for r in response.topics
        }

    def delete_topics(self, names: Iterable[str]) -> dict[str, TopicResult]:
        """DeleteTopics; one result per topic."""
        names = list(names)
        conn = self._net.bootstrap()
        cls = DeleteTopicsRequest
        version = conn.api_version(ApiKey.DELETE_TOPICS)
        if version >= 6:
            request = cls(
                topics=[cls.DeleteTopicState(name=n) for n in names],
                timeout_ms=self.request_timeout_ms,
            )
        else:
            request = cls(topic_names=names, timeout_ms=self.request_timeout_ms)
        response = conn.send(request, version)
        return {  # named: the request names its topics (a name is null only for ids)
            r.name: TopicResult(r.name, known_code(r.error_code), r.error_message)
            for r in response.responses
            if r.name is not None
        }

    def create_partitions(self, new_counts: Mapping[str, int]) -> dict[str, TopicResult]:
        """CreatePartitions: raise each topic's partition count to the given total."""
        cls = CreatePartitionsRequest
        request = cls(
            topics=[
                cls.CreatePartitionsTopic(name=name, count=count, assignments=None)
                for name, count in new_counts.items()
            ],
            timeout_ms=self.request_timeout_ms,
            validate_only=False,
        )
        response = self._net.bootstrap().send(request)
        return {
            r.name: TopicResult(r.name, known_code(r.error_code), r.error_message)
            for r in response.results
        }

    def list_topics(self, include_internal: bool = False) -> list[str]:
        """Names of every topic, sorted (internal topics only when asked)."""
        _brokers, topics = self._net.metadata(None)
        return sorted(
            t.name for t in topics if t.name is not None and (include_internal or not t.is_internal)
        )

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """Metadata for the named topics (every topic when `names` is None)."""
        _brokers, topics = self._net.metadata(None if names is None else list(names))
        return {t.name: _describe(t.name, t) for t in topics if t.name is not None}

    def describe_cluster(self) -> list[BrokerNode]:
        """The brokers Metadata names."""
        brokers, _topics = self._net.metadata([])
        return brokers

    # ------------------------------------------------------------------ offsets

    def list_offsets(
        self, specs: Mapping[TopicPartition, OffsetSpec], isolation_level: int = 0
    ) -> dict[TopicPartition, ListOffsetsResult]:
        """ListOffsets for each partition, sent to its leader. isolation_level 0 is
        read_uncommitted (latest = high watermark), 1 read_committed (latest = LSO)."""
        by_leader, errors = self._by_leader(specs)
        results = {tp: ListOffsetsResult(code) for tp, code in errors.items()}
        for node, tps in by_leader.items():
            batch = {tp: specs[tp] for tp in tps}
            results.update(self._list_offsets_on(self._net.to_node(node), batch, isolation_level))
        return results

    def delete_records(
        self, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, DeletedRecords]:
        """DeleteRecords: move each partition's log start offset up to the given offset (-1:
        the high watermark), sent to its leader; the answer is the new low watermark."""
        by_leader, errors = self._by_leader(offsets)
        results = {tp: DeletedRecords(code) for tp, code in errors.items()}
        cls = DeleteRecordsRequest
        for node, tps in by_leader.items():
            by_topic: dict[str, list[Any]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(
                    cls.DeleteRecordsTopic.DeleteRecordsPartition(
                        partition_index=tp.partition, offset=offsets[tp]
                    )
                )
            request = cls(
                topics=[
                    cls.DeleteRecordsTopic(name=n, partitions=ps) for n, ps in by_topic.items()
                ],
                timeout_ms=self.request_timeout_ms,
            )
            response = self._net.to_node(node).send(request)
            for topic in response.topics:
                for p in topic.partitions:
                    results[TopicPartition(topic.name, p.partition_index)] = DeletedRecords(
                        known_code(p.error_code), p.low_watermark
                    )
        return results

    def _by_leader(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[dict[BrokerNode, list[TopicPartition]], dict[TopicPartition, ErrorCode]]:
        """Group partitions by their leader (from Metadata); the error of each partition that
        has none (unknown topic or partition)."""
        partitions = list(partitions)
        brokers, topics = self._net.metadata(sorted({tp.topic for tp in partitions}))
        nodes = {b.node_id: b for b in brokers}
        known = {t.name: t for t in topics}
        by_leader: dict[BrokerNode, list[TopicPartition]] = {}
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            topic = known.get(tp.topic)
            if topic is None or topic.error_code != ErrorCode.NONE:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None else topic.error_code
                errors[tp] = known_code(code)
                continue
            part = next((p for p in topic.partitions if p.partition_index == tp.partition), None)
            if part is None or part.leader_id not in nodes:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            by_leader.setdefault(nodes[part.leader_id], []).append(tp)
        return by_leader, errors

    # ------------------------------------------------------------------ consumer groups

    def list_consumer_group_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        require_stable: bool = True,
        timeout: float | None = None,
    ) -> dict[TopicPartition, tuple[int, str] | None]:
        """The group's committed (offset, metadata) per partition, None where nothing is
        committed (every partition with an offset when `partitions` is None)
        (OffsetFetch v7, sent to the group's coordinator). With `require_stable`
        (KIP-447, Kafka's `requireStable` option) the broker answers UNSTABLE_OFFSET_COMMIT
        while a transaction with offsets for the group is pending, and this call waits for
        it to complete; so do coordinator moves and loads, up to `timeout` seconds (default
        request.timeout.ms). Other errors raise the typed `KafkaError`."""
        wanted = [] if partitions is None else list(partitions)
        deadline = time.monotonic() + (
            self.request_timeout_ms / 1000 if timeout is None else timeout
        )
        cls = OffsetFetchRequest
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = cls(
            group_id=group_id,
            topics=None
            if partitions is None
            else [
                cls.OffsetFetchRequestTopic(name=t, partition_indexes=p)
                for t, p in by_topic.items()
            ],
            require_stable=require_stable,
        )
        while True:
            conn = self._net.to_coordinator(GROUP_KEY, group_id, deadline)
            version = min(conn.api_version(ApiKey.OFFSET_FETCH), _OFFSET_FETCH_SINGLE_GROUP_MAX)
            if require_stable and version < 7:
                raise UnsupportedVersionError("requireStable needs OffsetFetch v7 (Kafka 2.5+)")
            response = conn.send(request, version)
            codes = [response.error_code] + [
                p.error_code for t in response.topics for p in t.partitions
            ]
            worst = next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)
            if worst in COORDINATOR_MOVED:
                self._net.forget_coordinator(GROUP_KEY, group_id)
            if wait_retriable(worst, deadline, f"OffsetFetch for group {group_id}"):
                continue
            out: dict[TopicPartition, tuple[int, str] | None] = dict.fromkeys(wanted)
            for t in response.topics:
                for p in t.partitions:
                    if p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = (
                            p.committed_offset,
                            p.metadata or "",
                        )
            return out

    def alter_consumer_group_offsets(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, tuple[int, str]],
        timeout: float | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit (offset, metadata) per partition for a group with no active members, as
        Kafka's `alterConsumerGroupOffsets` does (OffsetCommit with generation -1, sent to the
        group's coordinator; v9 at most, so it stays a classic-protocol commit). Returns the
        error code per partition (NONE when stored); a group with active members answers
        UNKNOWN_MEMBER_ID. Coordinator moves and loads are retried up to `timeout`."""
        deadline = time.monotonic() + (
            self.request_timeout_ms / 1000 if timeout is None else timeout
        )
        cls = OffsetCommitRequest
        topic_cls = cls.OffsetCommitRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for tp, (offset, metadata) in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                topic_cls.OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=offset,
                    committed_metadata=metadata,
                )
            )
        request = cls(
            group_id=group_id,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        while True:
            conn = self._net.to_coordinator(GROUP_KEY, group_id, deadline)
            response = conn.send(request, min(conn.api_version(ApiKey.OFFSET_COMMIT), 9))
            out = {
                TopicPartition(t.name, p.partition_index): known_code(p.error_code)
                for t in response.topics
                for p in t.partitions
            }
            worst = next((c for c in out.values() if c in GROUP_RETRIABLE), ErrorCode.NONE)
            if worst in COORDINATOR_MOVED:
                self._net.forget_coordinator(GROUP_KEY, group_id)
            if worst == ErrorCode.NONE or time.monotonic() >= deadline:
                return out
            time.sleep(RETRY_S)

    def describe_configs(
        self, resources: Iterable[ConfigResource]
    ) -> dict[ConfigResource, ConfigsResult]:
        """Every config of each topic / broker with its value and source (DescribeConfigs)."""
        return config_admin.describe_configs(self._net, resources)

    def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, list[AlterOp]], validate_only: bool = False
    ) -> dict[ConfigResource, ConfigsResult]:
        """SET / DELETE / APPEND / SUBTRACT config values (IncrementalAlterConfigs)."""
        return config_admin.incremental_alter_configs(self._net, dict(changes), validate_only)

    def list_groups(self) -> list[GroupListing]:
        """Every consumer group on the cluster (ListGroups to each broker)."""
        return group_admin.list_groups(self._net)

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """State, protocol and members (with their assigned partitions) of each group."""
        return group_admin.describe_groups(self._net, list(group_ids))

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """Delete groups without members, with their offsets; an error code per group."""
        return group_admin.delete_groups(self._net, list(group_ids))

    def list_transactions(
        self,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        min_duration_ms: int = -1,
    ) -> list[TransactionListing]:
        """Every transactional id the brokers' coordinators hold (ListTransactions, KIP-664),
        filtered as Kafka's `ListTransactionsOptions` does: by state name, by producer id, and
        by how long the transaction has been open (KIP-994)."""
        return txn_admin.list_transactions(self._net, states, producer_ids, min_duration_ms)

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """State, producer id/epoch, timeout, start time and partitions of each transactional
        id (DescribeTransactions at its coordinator); TRANSACTIONAL_ID_NOT_FOUND as a value."""
        timeout = self.request_timeout_ms / 1000
        return txn_admin.describe_transactions(self._net, transactional_ids, timeout)

    def describe_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, ProducersResult]:
        """The producers with state on each partition, with the first offset of any open
        transaction (DescribeProducers at each partition's leader)."""
        by_leader, errors = self._by_leader(partitions)
        results = {tp: ProducersResult(code) for tp, code in errors.items()}
        for node, tps in by_leader.items():
            results.update(txn_admin.describe_producers(self._net.to_node(node), tps))
        return results

    def abort_transaction(self, spec: AbortTransactionSpec) -> ErrorCode:
        """Abort a hanging transaction on one partition (an ABORT marker written by the
        partition's leader, KIP-664); the partition's error code."""
        by_leader, errors = self._by_leader([spec.partition])
        if errors:
            return errors[spec.partition]
        (node,) = by_leader
        return txn_admin.abort_transaction(self._net.to_node(node), spec)

    # ------------------------------------------------------------------ log directories

    def describe_log_dirs(
        self,
        broker_ids: Iterable[int] | None = None,
        partitions: Iterable[TopicPartition] | None = None,
    ) -> dict[int, list[LogDirDescription]]:
        """Each broker's log directories (DescribeLogDirs at every broker, or those of
        `broker_ids`), with the sizes of the `partitions` they hold (None: every partition)."""
        wanted = None if broker_ids is None else set(broker_ids)
        asked = None if partitions is None else list(partitions)
        return {
            node.node_id: log_dirs_admin.describe_log_dirs(self._net.to_node(node), asked)
            for node in self.describe_cluster()
            if wanted is None or node.node_id in wanted
        }

    # ------------------------------------------------------------------ ACLs

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[AclResult]:
        """Create ACLs (CreateAcls); one result per binding, in order."""
        return acl_admin.create_acls(self._net, bindings)

    def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs matching the filter (DescribeAcls)."""
        return acl_admin.describe_acls(self._net, acl_filter)

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[DeletedAcls]:
        """Delete the ACLs matching each filter (DeleteAcls); one result per filter."""
        return acl_admin.delete_acls(self._net, filters)

    def _list_offsets_on(
        self,
        conn: BrokerConnection,
        specs: Mapping[TopicPartition, OffsetSpec],
        isolation_level: int,
    ) -> dict[TopicPartition, ListOffsetsResult]:
        cls = ListOffsetsRequest
        by_topic: dict[str, list[Any]] = {}
        for tp, spec in specs.items():
            by_topic.setdefault(tp.topic, []).append(
                cls.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=tp.partition, timestamp=spec.timestamp
                )
            )
        request = cls(
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[cls.ListOffsetsTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
        )
        response = conn.send(request)
        out = {}
        for topic in response.topics:
            for p in topic.partitions:
                out[TopicPartition(topic.name, p.partition_index)] = ListOffsetsResult(
                    known_code(p.error_code), p.offset, p.timestamp
                )
        return out


def _describe(name: str, topic: MetadataResponse.MetadataResponseTopic) -> TopicDescription:
    partitions = tuple(
        PartitionDescription(
            partition=p.partition_index,
            leader=p.leader_id,
            replicas=tuple(p.replica_nodes),
            isr=tuple(p.isr_nodes),
            error_code=known_code(p.error_code),
        )
        for p in sorted(topic.partitions, key=lambda p: p.partition_index)
    )
    topic_id = topic.topic_id
    return TopicDescription(
        name,
        known_code(topic.error_code),
        topic.is_internal,
        partitions,
        topic_id if topic_id and topic_id.int else None,
    )
