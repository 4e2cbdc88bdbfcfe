"""OffsetFetch handler.

API: OffsetFetch (key 9), versions 1-9.

Behaviour: the committed offsets of a group for the requested partitions (-1 and empty
metadata when nothing is committed, also for unknown topics), or every committed partition
when the topic list is null (v2+). Transactional offsets are not visible until their
transaction commits; with require_stable (v7+, KIP-447) a partition with a pending
transactional offset answers UNSTABLE_OFFSET_COMMIT (retriable: the consumer waits for the
transaction to finish).

Versions: v1 group-level errors repeated on every partition; v2 null topics = all, top-level
error_code; v3 throttle_time_ms; v5 committed_leader_epoch; v6 flexible; v7 require_stable;
v8 several groups in one request, errors per group (KIP-709); v9 member id and epoch (KIP-848,
accepted and not checked: classic groups only).

Authorization (authorizer on): DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for
it; DESCRIBE on each requested topic, else TOPIC_AUTHORIZATION_FAILED (offset -1) for its
partitions; an all-topics fetch leaves out the topics the caller may not DESCRIBE, as Kafka.

Deviations: v10 (topic ids) is not served.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from onceflow.broker.authorization import allowed_names, denied, denied_names, enabled
from onceflow.common import TopicPartition
from onceflow.coordinator.group.results import OffsetFetchResult, PartitionOffset
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.offset_fetch import OffsetFetchResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.offset_fetch import OffsetFetchRequest

_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Partition = _Topic.OffsetFetchResponsePartition
_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_GroupTopic = _Group.OffsetFetchResponseTopics
_GroupPartition = _GroupTopic.OffsetFetchResponsePartitions


class _RequestedTopic(Protocol):
    """A topic of an OffsetFetch request (of the one-group or the per-group form)."""

    @property
    def name(self) -> str: ...

    @property
    def partition_indexes(self) -> Sequence[int]: ...


_P = TypeVar("_P")
_T_co = TypeVar("_T_co", covariant=True)
_P_co = TypeVar("_P_co", covariant=True)


class _PartitionAnswer(Protocol[_P_co]):
    def __call__(
        self,
        *,
        partition_index: int,
        committed_offset: int,
        committed_leader_epoch: int,
        metadata: str | None,
        error_code: int,
    ) -> _P_co: ...


class _TopicAnswer(Protocol[_T_co, _P]):
    def __call__(self, *, name: str, partitions: list[_P]) -> _T_co: ...


def _requested(topics: Sequence[_RequestedTopic] | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]


def _by_topic(
    items: Iterable[tuple[TopicPartition, PartitionOffset]],
) -> dict[str, list[tuple[int, PartitionOffset]]]:
    out: dict[str, list[tuple[int, PartitionOffset]]] = {}
    for tp, offset in items:
        out.setdefault(tp.topic, []).append((tp.partition, offset))
    return out


_API = ApiKey.OFFSET_FETCH
_TOPIC_DENIED = PartitionOffset(error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)


async def _fetch_one(
    ctx: RequestContext,
    group_id: str,
    topics: Sequence[_RequestedTopic] | None,
    require_stable: bool,
) -> OffsetFetchResult:
    """One group's offsets, as far as the caller may see them."""
    refused = denied(ctx, _API, "group", group_id)
    if refused is not None:
        return OffsetFetchResult(refused, {})
    coordinator = ctx.broker.group_coordinator
    if topics is None:
        result = await coordinator.fetch_offsets(group_id, None, require_stable)
        if result.error != ErrorCode.NONE or not enabled(ctx):
            return result
        shown = set(allowed_names(ctx, _API, "topic", {tp.topic for tp in result.partitions}))
        return OffsetFetchResult(
            result.error, {tp: o for tp, o in result.partitions.items() if tp.topic in shown}
        )
    unauthorized = denied_names(ctx, _API, "topic", [t.name for t in topics])
    wanted = [t for t in topics if t.name not in unauthorized]
    result = await coordinator.fetch_offsets(group_id, _requested(wanted), require_stable)
    if result.error != ErrorCode.NONE or not unauthorized:
        return result
    return OffsetFetchResult(
        result.error,
        {
            tp: _TOPIC_DENIED if tp.topic in unauthorized else result.partitions[tp]
            for tp in _requested(topics) or ()
        },
    )


async def handle_offset_fetch(
    ctx: RequestContext, header: RequestHeader, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    """Answer the committed offsets of one group (v1-7) or several groups (v8+)."""
    version = header.request_api_version
    require_stable = version >= 7 and request.require_stable
    if version >= 8:
        groups = []
        for group in request.groups:
            result = await _fetch_one(ctx, group.group_id, group.topics, require_stable)
            answered = _topics(result.partitions.items(), _GroupTopic, _GroupPartition)
            groups.append(_Group(group_id=group.group_id, error_code=result.error, topics=answered))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    result = await _fetch_one(ctx, request.group_id, request.topics, require_stable)
    if version < 2 and result.error != ErrorCode.NONE:
        # v0-1 have no top-level error: Kafka repeats the group's error on every partition
        failed = PartitionOffset(error=result.error)
        items = [(tp, failed) for tp in _requested(request.topics) or ()]
    else:
        items = list(result.partitions.items())
    topics = _topics(items, _Topic, _Partition)
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=result.error)


def _topics(
    items: Iterable[tuple[TopicPartition, PartitionOffset]],
    topic_cls: _TopicAnswer[_T_co, _P],
    partition_cls: _PartitionAnswer[_P],
) -> list[_T_co]:
    """The answer's topics (of the one-group or the per-group form) for `items`."""
    return [
        topic_cls(
            name=name,
            partitions=[
                partition_cls(
                    partition_index=index,
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    metadata=o.metadata,
                    error_code=o.error,
                )
                for index, o in parts
            ],
        )
        for name, parts in _by_topic(items).items()
    ]
