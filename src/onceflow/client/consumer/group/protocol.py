"""The consumer protocol's subscription and assignment bytes (pure).

JoinGroup carries, per offered strategy, a `ConsumerProtocolSubscription` and SyncGroup
hands each member a `ConsumerProtocolAssignment`; both are an int16 version followed by the
body, laid out by the classes generated from `tools/specs/ConsumerProtocol*.json`. A body of a
version newer than ours is read with our newest layout (versions only append fields), as
Kafka's `ConsumerProtocol` does.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TypeVar

from onceflow.common import TopicPartition
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.internal import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from onceflow.protocol.message import Message

__all__ = [
    "SUBSCRIPTION_VERSION",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

SUBSCRIPTION_VERSION = 1  # topics, user data, owned partitions
ASSIGNMENT_VERSION = 1
_VERSION = struct.Struct(">h")


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def encode_subscription(
    topics: Iterable[str], owned: Iterable[TopicPartition] = (), user_data: bytes | None = None
) -> bytes:
    """A member's subscription metadata for JoinGroup."""
    cls = ConsumerProtocolSubscription
    body = cls(
        topics=sorted(set(topics)),
        user_data=user_data,
        owned_partitions=[
            cls.TopicPartition(topic=t, partitions=ps) for t, ps in _by_topic(owned).items()
        ],
    )
    return _VERSION.pack(SUBSCRIPTION_VERSION) + body.encode(SUBSCRIPTION_VERSION)


_M = TypeVar("_M", bound=Message)


def _split(data: bytes | memoryview, cls: type[_M]) -> tuple[_M, int]:
    if data is None or len(data) < 2:
        raise DecodeError(f"{cls.__name__}: missing version")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise DecodeError(f"{cls.__name__}: negative version {version}")
    version = min(version, cls.VALID_VERSIONS[1])
    body, _end = cls.decode_from(memoryview(data), version, 2)
    return body, version


def decode_subscription(data: bytes | memoryview) -> list[str]:
    """The topics of a subscription (raises `DecodeError` on bad bytes)."""
    body, _version = _split(data, ConsumerProtocolSubscription)
    return list(body.topics)


def encode_assignment(
    partitions: Iterable[TopicPartition], user_data: bytes | None = None
) -> bytes:
    """The assignment bytes the leader sends for one member in SyncGroup."""
    cls = ConsumerProtocolAssignment
    body = cls(
        assigned_partitions=[
            cls.TopicPartition(topic=t, partitions=ps) for t, ps in _by_topic(partitions).items()
        ],
        user_data=user_data,
    )
    return _VERSION.pack(ASSIGNMENT_VERSION) + body.encode(ASSIGNMENT_VERSION)


def decode_assignment(data: bytes | memoryview | None) -> list[TopicPartition]:
    """The partitions of an assignment; empty bytes mean no partitions (raises
    `DecodeError` on bad bytes)."""
    if data is None or len(data) == 0:
        return []
    body, _version = _split(data, ConsumerProtocolAssignment)
    return [TopicPartition(t.topic, p) for t in body.assigned_partitions for p in t.partitions]
