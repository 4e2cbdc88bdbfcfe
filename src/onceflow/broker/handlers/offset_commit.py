"""OffsetCommit handler.

API: OffsetCommit (key 8), versions 2-9.

Behaviour: partitions of unknown topics (or beyond a topic's partition count) are
UNKNOWN_TOPIC_OR_PARTITION; the rest go to the group coordinator's `commit_offsets`, which
appends them as one batch to the group's `__consumer_offsets` partition and answers once the
batch is durable (fsynced). A member of an active generation commits with its generation and
member id (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID / REBALANCE_IN_PROGRESS
when they do not match); generation -1 with an empty member id is a "simple" commit, accepted
only while the group has no members. Metadata longer than `offset.metadata.max.bytes` is
OFFSET_METADATA_TOO_LARGE.

Versions: v2-4 retention_time_ms (an explicit offset expiry; -1 uses the broker's
`offsets.retention.minutes`); v3 throttle_time_ms; v5 drops retention; v6
committed_leader_epoch; v7 group_instance_id; v8 flexible; v9 GROUP_ID_NOT_FOUND for a
generation-based commit to an unknown group (KIP-848 wire change; classic groups only here).

Authorization (authorizer on): READ on the group, else GROUP_AUTHORIZATION_FAILED for every
partition and nothing is written; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its
partitions (the others are committed), as Kafka.

Deviations: v10 (topic ids) is not served. The KIP-848 consumer protocol's member epochs are
not supported: the generation field is always a classic generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from onceflow.broker.authorization import denied, denied_names
from onceflow.common import TopicPartition
from onceflow.coordinator.group.offsets import CommittedOffset
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.offset_commit import OffsetCommitResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.offset_commit import OffsetCommitRequest

_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = _Topic.OffsetCommitResponsePartition


class PartitionOfRequest(Protocol):
    """A partition of an offsets request (OffsetCommit, TxnOffsetCommit, OffsetDelete)."""

    @property
    def partition_index(self) -> int: ...


class TopicOfRequest(Protocol):
    """A topic of an offsets request."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[PartitionOfRequest]: ...


class CommittedPartition(PartitionOfRequest, Protocol):
    """A partition of a commit request (OffsetCommit, TxnOffsetCommit)."""

    @property
    def committed_offset(self) -> int: ...

    @property
    def committed_leader_epoch(self) -> int: ...

    @property
    def committed_metadata(self) -> str | None: ...


class CommitTopic(Protocol):
    """A topic of a commit request."""

    @property
    def name(self) -> str: ...

    @property
    def partitions(self) -> Sequence[CommittedPartition]: ...


class OffsetsRequest(Protocol):
    """An offsets request: its topics."""

    @property
    def topics(self) -> Sequence[TopicOfRequest]: ...


_P = TypeVar("_P")
_T_co = TypeVar("_T_co", covariant=True)
_P_co = TypeVar("_P_co", covariant=True)


class PartitionAnswer(Protocol[_P_co]):
    """The generated class of one partition's answer."""

    def __call__(self, *, partition_index: int, error_code: int) -> _P_co: ...


class TopicAnswer(Protocol[_T_co, _P]):
    """The generated class of one topic's answer, holding partition answers `_P`."""

    def __call__(self, *, name: str, partitions: list[_P]) -> _T_co: ...


def partition_exists(broker: BrokerState, topic: str, partition: int) -> bool:
    """True when `topic` exists and has `partition`."""
    return broker.get_log(topic, partition) is not None


def partitions_of(topics: Iterable[TopicOfRequest]) -> list[TopicPartition]:
    """Every partition of an offsets request's topics."""
    return [TopicPartition(t.name, p.partition_index) for t in topics for p in t.partitions]


def topic_names(request: OffsetsRequest) -> list[str]:
    """The topic names of an offsets request."""
    return [t.name for t in request.topics]


def collect_offsets(
    broker: BrokerState,
    topics: Iterable[CommitTopic],
    with_leader_epoch: bool,
    unauthorized: frozenset[str] = frozenset(),
) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, CommittedOffset]]:
    """Split a commit request's partitions into errors Kafka's API layer answers (topics in
    `unauthorized`: TOPIC_AUTHORIZATION_FAILED; missing ones: UNKNOWN_TOPIC_OR_PARTITION) and
    the offsets to hand to the coordinator."""
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, CommittedOffset] = {}
    for topic in topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name in unauthorized:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not partition_exists(broker, topic.name, p.partition_index):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            epoch = p.committed_leader_epoch if with_leader_epoch else -1
            offsets[tp] = CommittedOffset(p.committed_offset, epoch, p.committed_metadata or "")
    return errors, offsets


def partition_responses(
    topics: Iterable[TopicOfRequest],
    errors: Mapping[TopicPartition, ErrorCode],
    topic_cls: TopicAnswer[_T_co, _P],
    partition_cls: PartitionAnswer[_P],
) -> list[_T_co]:
    """The response topics of an offsets request (OffsetCommit, TxnOffsetCommit, OffsetDelete):
    every requested partition, in request order, with its error (NONE when none was set)."""
    return [
        topic_cls(
            name=topic.name,
            partitions=[
                partition_cls(
                    partition_index=p.partition_index,
                    error_code=errors.get(
                        TopicPartition(topic.name, p.partition_index), ErrorCode.NONE
                    ),
                )
                for p in topic.partitions
            ],
        )
        for topic in topics
    ]


async def handle_offset_commit(
    ctx: RequestContext, header: RequestHeader, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    """Commit offsets for a group."""
    broker = ctx.broker
    version = header.request_api_version
    refused = denied(ctx, ApiKey.OFFSET_COMMIT, "group", request.group_id)
    if refused is not None:
        errors = dict.fromkeys(partitions_of(request.topics), refused)
        offsets: dict[TopicPartition, CommittedOffset] = {}
    else:
        unauthorized = denied_names(ctx, ApiKey.OFFSET_COMMIT, "topic", topic_names(request))
        errors, offsets = collect_offsets(
            broker, request.topics, with_leader_epoch=version >= 6, unauthorized=unauthorized
        )
    if offsets:
        errors.update(
            await broker.group_coordinator.commit_offsets(
                request.group_id,
                request.generation_id_or_member_epoch,
                request.member_id or "",
                request.group_instance_id if version >= 7 else None,
                offsets,
                retention_time_ms=request.retention_time_ms if 2 <= version <= 4 else -1,
                api_version=version,
            )
        )
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=partition_responses(request.topics, errors, _Topic, _Partition),
    )
