"""Answers of the group coordinator's requests (what the broker handlers turn into responses)."""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.common import TopicPartition
from onceflow.coordinator.group.state import GroupState
from onceflow.log.partition import PartitionLog
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "CLASSIC_GROUP_TYPE",
    "GroupSummary",
    "GroupOverview",
    "MemberSummary",
    "OffsetFetchResult",
    "PartitionOffset",
    "PendingWrite",
]

CLASSIC_GROUP_TYPE = "classic"


@dataclass(frozen=True)
class PendingWrite:
    """A batch appended to `__consumer_offsets`, not yet known durable (or the append error)."""

    error: ErrorCode
    log: PartitionLog | None = None
    base_offset: int = -1
    next_offset: int = -1


@dataclass(frozen=True)
class PartitionOffset:
    """One partition of an OffsetFetch answer (-1 and "" when nothing is committed)."""

    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True)
class OffsetFetchResult:
    """OffsetFetch answer for one group: group-level error, then per partition."""

    error: ErrorCode
    partitions: dict[TopicPartition, PartitionOffset]


@dataclass(frozen=True)
class MemberSummary:
    """A member as DescribeGroups shows it (metadata and assignment only when STABLE)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupSummary:
    """DescribeGroups answer for one group."""

    group_id: str
    error: ErrorCode
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[MemberSummary, ...] = ()


@dataclass(frozen=True)
class GroupOverview:
    """ListGroups entry."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = CLASSIC_GROUP_TYPE
