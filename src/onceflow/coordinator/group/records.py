"""The records of `__consumer_offsets`: keys, values, tombstones, and the batches holding them.

Layout as Kafka writes it. A key is an int16 key version followed by the key struct at that
version: 0 or 1 for a committed offset (`OffsetCommitKey`, we write 1), 2 for group metadata
(`GroupMetadataKey`); higher versions belong to newer group types and are skipped when loading.
A value is an int16 value version followed by the value struct; a null value is a tombstone.
We write `OffsetCommitValue` version 3 (version 1 when the commit carries an explicit expiry,
as Kafka does) and `GroupMetadataValue` version 3. Newer value versions are read as the newest
version we know (new fields are tagged). The structs are generated from `tools/specs/*.json`.

Plain commits and group records go in a batch without a producer id; transactional offset
commits go in a transactional batch carrying the producer's id and epoch and sequence -1,
appended with origin COORDINATOR (the epoch is checked, sequences are not).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, BytesLike, TopicPartition
from onceflow.coordinator.group.member import MemberMetadata
from onceflow.coordinator.group.offsets import CommittedOffset
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.internal import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from onceflow.protocol.message import Message
from onceflow.records.batch import NO_SEQUENCE
from onceflow.records.builder import BatchBuilder

__all__ = [
    "GroupRecord",
    "OffsetRecord",
    "OffsetsBatchWriter",
    "encode_group_metadata",
    "encode_offset_commit",
    "group_metadata_key",
    "offset_commit_key",
    "parse_record",
]

log = logging.getLogger("onceflow.coordinator.group")

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
_INT16 = struct.Struct(">h")


class CorruptOffsetsRecord(ValueError):
    """A `__consumer_offsets` record that cannot be decoded."""


@dataclass(frozen=True)
class OffsetRecord:
    """A committed offset (or its tombstone when `offset` is None)."""

    group_id: str
    tp: TopicPartition
    offset: CommittedOffset | None


@dataclass(frozen=True)
class GroupRecord:
    """A group's metadata (or its tombstone when `value` is None)."""

    group_id: str
    value: GroupMetadataValue | None


def offset_commit_key(group_id: str, tp: TopicPartition) -> bytes:
    """Key of the offset record of `group_id` for `tp`."""
    key = OffsetCommitKey(group=group_id, topic=tp.topic, partition=tp.partition)
    return _INT16.pack(OFFSET_COMMIT_KEY_VERSION) + key.encode(OFFSET_COMMIT_KEY_VERSION)


def group_metadata_key(group_id: str) -> bytes:
    """Key of the metadata record of `group_id`."""
    key = GroupMetadataKey(group=group_id)
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + key.encode(GROUP_METADATA_KEY_VERSION)


def encode_offset_commit(offset: CommittedOffset) -> bytes:
    """Value of an offset record."""
    expiring = offset.expire_timestamp >= 0
    version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY if expiring else OFFSET_COMMIT_VALUE_VERSION
    value = OffsetCommitValue(
        offset=offset.offset,
        leader_epoch=offset.leader_epoch,
        metadata=offset.metadata,
        commit_timestamp=offset.commit_timestamp,
        expire_timestamp=offset.expire_timestamp,
    )
    return _INT16.pack(version) + value.encode(version)


def encode_group_metadata(value: GroupMetadataValue) -> bytes:
    """Value of a group metadata record."""
    version = GROUP_METADATA_VALUE_VERSION
    return _INT16.pack(version) + value.encode(version)


def _split_version(data: BytesLike | None, what: str) -> tuple[int, memoryview]:
    if data is None or len(data) < 2:
        raise CorruptOffsetsRecord(f"{what} shorter than its version")
    version: int
    (version,) = _INT16.unpack_from(data, 0)
    return version, memoryview(data)[2:]


_M = TypeVar("_M", bound=Message)


def _decode(cls: type[_M], body: BytesLike, version: int, what: str) -> _M:
    low, high = cls.VALID_VERSIONS
    if version < low:
        raise CorruptOffsetsRecord(f"{what}: unknown version {version}")
    try:
        return cls.decode(bytes(body), min(version, high))
    except DecodeError as exc:
        raise CorruptOffsetsRecord(f"{what} version {version}: {exc}") from exc


def parse_record(
    key: BytesLike | None, value: BytesLike | None, record_offset: int
) -> OffsetRecord | GroupRecord | None:
    """Decode one record; None for a key version of a record kind we do not know.

    Raises `CorruptOffsetsRecord` for undecodable data.
    """
    key_version, key_body = _split_version(key, "key")
    if key_version in (0, 1):
        return _offset_record(key_body, key_version, value, record_offset)
    if key_version == GROUP_METADATA_KEY_VERSION:
        return _group_record(key_body, key_version, value)
    log.debug("skipping __consumer_offsets record with key version %d", key_version)
    return None


def _offset_record(
    key_body: memoryview, key_version: int, value: BytesLike | None, record_offset: int
) -> OffsetRecord:
    k = _decode(OffsetCommitKey, key_body, key_version, "offset commit key")
    tp = TopicPartition(k.topic, k.partition)
    if value is None:
        return OffsetRecord(k.group, tp, None)
    value_version, value_body = _split_version(value, "offset commit value")
    v = _decode(OffsetCommitValue, value_body, value_version, "offset commit value")
    expire = v.expire_timestamp if value_version == 1 else -1
    offset = CommittedOffset(
        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, expire, record_offset
    )
    return OffsetRecord(k.group, tp, offset)


def _group_record(key_body: memoryview, key_version: int, value: BytesLike | None) -> GroupRecord:
    k = _decode(GroupMetadataKey, key_body, key_version, "group metadata key")
    if value is None:
        return GroupRecord(k.group, None)
    value_version, value_body = _split_version(value, "group metadata value")
    v = _decode(GroupMetadataValue, value_body, value_version, "group metadata value")
    if value_version == 0:  # no rebalance timeout before v1: Kafka uses the session timeout
        for member in v.members:
            member.rebalance_timeout = member.session_timeout
    return GroupRecord(k.group, v)


class OffsetsBatchWriter:
    """Collects `__consumer_offsets` records into one batch (Kafka writes each commit's
    records as one batch, so a commit is applied whole or not at all)."""

    def __init__(
        self,
        now_ms: int,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
    ) -> None:
        self.now_ms = now_ms
        self.transactional = producer_id != NO_PRODUCER_ID
        self._builder = BatchBuilder(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=NO_SEQUENCE,
            is_transactional=self.transactional,
        )

    def __len__(self) -> int:
        return len(self._builder)

    def add(self, key: bytes, value: bytes | None) -> int:
        """Add a record; returns its offset delta within the batch."""
        return self._builder.append(self.now_ms, key, value)

    def add_offset(self, group_id: str, tp: TopicPartition, offset: CommittedOffset) -> int:
        """Add an offset record."""
        return self.add(offset_commit_key(group_id, tp), encode_offset_commit(offset))

    def add_offset_tombstones(self, group_id: str, tps: Sequence[TopicPartition]) -> None:
        """Add a tombstone per partition."""
        for tp in tps:
            self.add(offset_commit_key(group_id, tp), None)

    def add_group(self, group_id: str, value: GroupMetadataValue | None) -> int:
        """Add a group metadata record (a tombstone when `value` is None)."""
        encoded = None if value is None else encode_group_metadata(value)
        return self.add(group_metadata_key(group_id), encoded)

    def build(self) -> bytearray:
        """The finished batch (at least one record must have been added)."""
        return self._builder.build()


def member_records(
    members: Sequence[MemberMetadata], assignment: Mapping[str, bytes], protocol: str | None
) -> list[GroupMetadataValue.MemberMetadata]:
    """`GroupMetadataValue.MemberMetadata` of each member, with its assignment."""
    return [
        GroupMetadataValue.MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(protocol or ""),
            assignment=bytes(assignment.get(m.member_id, b"")),
        )
        for m in members
    ]
