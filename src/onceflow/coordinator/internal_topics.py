"""The internal topics, and the one rule for what clients may not do to them.

`__consumer_offsets` and `__transaction_state` belong to the coordinators: they create them on
first use with their own partition counts and configs, and their in-memory state mirrors
what is in them. A client that deletes one, creates one by hand, adds partitions (which moves
every key to another coordinator partition), deletes records from one or writes records into
one breaks every group or every transactional id. So every broker handler that lets a client
change a topic asks `internal_topic_refusal` first, and refuses with the answer below.

Kafka's answers (Apache Kafka's source, trunk of late 2024):
- Produce: `ReplicaManager.appendToLocalLog` refuses client appends to an internal topic with
  INVALID_TOPIC_EXCEPTION "Cannot append to internal topic ..." (Kafka lets a client whose
  client id is `__admin_client` through; onceflow has no such back door).
- DeleteRecords: `ReplicaManager.deleteRecords` answers INVALID_TOPIC_EXCEPTION "Cannot delete
  records of internal topic ...".
- CreateTopics: Kafka's broker refuses to create its internal `__cluster_metadata` topic with
  INVALID_REQUEST "Creation of internal topic ... is prohibited."; the coordinators' topics
  are protected only by ACLs (TOPIC_AUTHORIZATION_FAILED) and by `kafka-topics.sh`, which
  refuses to delete them or change their partition count. onceflow has no ACLs, so it refuses
  CreateTopics, DeleteTopics and CreatePartitions on every internal topic at the broker, with
  Kafka's INVALID_REQUEST wording (docs/deviations.md).
"""

from __future__ import annotations

from enum import Enum
from types import MappingProxyType
from typing import Final

from onceflow.protocol.errors import ErrorCode

__all__ = [
    "GROUP_METADATA_TOPIC",
    "INTERNAL_TOPICS",
    "TRANSACTION_STATE_TOPIC",
    "TopicOperation",
    "internal_topic_refusal",
    "is_internal",
]

GROUP_METADATA_TOPIC: Final = "__consumer_offsets"
TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
INTERNAL_TOPICS: Final = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})


class TopicOperation(Enum):
    """What a client request would do to a topic."""

    CREATE = "create"
    DELETE = "delete"
    CREATE_PARTITIONS = "create_partitions"
    DELETE_RECORDS = "delete_records"
    PRODUCE = "produce"


# operation -> (error code, message with {topic})
_REFUSALS: Final = MappingProxyType(
    {
        TopicOperation.CREATE: (
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic {topic} is prohibited.",
        ),
        TopicOperation.DELETE: (
            ErrorCode.INVALID_REQUEST,
            "Deletion of internal topic {topic} is prohibited.",
        ),
        TopicOperation.CREATE_PARTITIONS: (
            ErrorCode.INVALID_REQUEST,
            "Changing the number of partitions of internal topic {topic} is prohibited.",
        ),
        TopicOperation.DELETE_RECORDS: (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            "Cannot delete records of internal topic {topic}",
        ),
        TopicOperation.PRODUCE: (
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            "Cannot append to internal topic {topic}",
        ),
    }
)


def is_internal(topic: str | None) -> bool:
    """Whether `topic` is one of the coordinators' internal topics (Kafka's `Topic.isInternal`)."""
    return topic in INTERNAL_TOPICS


def internal_topic_refusal(
    topic: str | None, operation: TopicOperation
) -> tuple[ErrorCode, str] | None:
    """The (error, message) a client request doing `operation` to `topic` gets, or None when
    `topic` is not internal and the request may go on."""
    if not is_internal(topic):
        return None
    error, template = _REFUSALS[operation]
    return error, template.format(topic=topic)
