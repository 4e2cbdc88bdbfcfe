"""Topic ids in the source's offsets: telling a recreated topic from the one the query read.

Every Kafka topic has an id (Metadata v10+, Kafka 2.8+). A topic deleted and created again
under the same name gets a new id, and its offsets start again at 0. Spark's Kafka source keeps
topic names only, so it misses a recreated topic whose offsets are already past the old ones and
reads it from the middle. The `onceflow` source keeps the id of every topic in its offsets, under
`TOPIC_IDS_KEY` beside Spark's `{"topic": {"partition": offset}}` JSON:

    {"orders": {"0": 1200, "1": 1187}, "@topicIds": {"orders": "6f1c…"}}

An id that differs from the one the broker reports now means the topic was recreated. Offsets
logged by an older onceflow (no ids) take the ids seen on the first batch after the upgrade; a
broker that reports no ids (Kafka before 2.8) leaves only the offset checks.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from onceflow.protocol.errors import ErrorCode
from onceflow.spark.offsets import (
    DataLossError,
    OffsetResolver,
    PartitionOffsets,
    from_json,
    to_json,
)

__all__ = [
    "TOPIC_IDS_KEY",
    "TopicIds",
    "current_topic_ids",
    "join_offsets",
    "recreated_topics",
    "restart_recreated",
    "split_offsets",
]

log = logging.getLogger(__name__)

TOPIC_IDS_KEY = "@topicIds"  # "@" is not allowed in a topic name, so no topic is called this
TopicIds = dict[str, str]


def split_offsets(data: Mapping[str, Any]) -> tuple[PartitionOffsets, TopicIds]:
    """The source's offset JSON -> (offsets per partition, topic ids by topic name)."""
    ids = {str(t): str(i) for t, i in dict(data.get(TOPIC_IDS_KEY) or {}).items()}
    offsets = from_json({t: ps for t, ps in data.items() if t != TOPIC_IDS_KEY})
    return offsets, ids


def join_offsets(offsets: Mapping[tuple[str, int], int], ids: Mapping[str, str]) -> dict[str, Any]:
    """Offsets and the ids of their topics -> the source's offset JSON."""
    out: dict[str, Any] = to_json(offsets)
    topics = {t for t, _ in offsets}
    kept = {t: ids[t] for t in sorted(ids) if t in topics}
    if kept:
        out[TOPIC_IDS_KEY] = kept
    return out


def current_topic_ids(resolver: OffsetResolver, topics: Iterable[str]) -> TopicIds:
    """The ids the broker reports now for `topics` (topics that do not exist, and brokers
    that send no ids, give none)."""
    names = sorted(set(topics))
    if not names:
        return {}
    described = resolver._retrying(lambda admin: admin.describe_topics(names))
    return {
        name: str(t.topic_id)
        for name, t in described.items()
        if t.error_code == ErrorCode.NONE and t.topic_id is not None
    }


def recreated_topics(known: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """Topics whose id changed (a deleted topic that is not back yet is not among them)."""
    return sorted(t for t, old in known.items() if current.get(t) not in (None, old))


def restart_recreated(
    begin: PartitionOffsets,
    known: Mapping[str, str],
    current: Mapping[str, str],
    latest: Mapping[tuple[str, int], int],
    fail_on_data_loss: bool,
) -> PartitionOffsets:
    """`begin` with the partitions of recreated topics taken out, so that they are read from
    offset 0 like new partitions; with failOnDataLoss=true a recreated topic is an error
    naming the topic, its partitions and offsets, and how to go on."""
    topics = recreated_topics(known, current)
    if not topics:
        return begin
    for topic in topics:
        message = _recreated_message(topic, known[topic], current[topic], begin, latest)
        if fail_on_data_loss:
            raise DataLossError(
                message + " To go on with the new topic from its first offset, restart the "
                "query with failOnDataLoss=false; to read everything again, start it with a "
                "new checkpoint location."
            )
        log.warning(
            "%s Reading the new topic from its first offset (failOnDataLoss=false).", message
        )
    return {tp: o for tp, o in begin.items() if tp[0] not in topics}


def _recreated_message(
    topic: str,
    old_id: str,
    new_id: str,
    begin: Mapping[tuple[str, int], int],
    latest: Mapping[tuple[str, int], int],
) -> str:
    read = ", ".join(
        f"{t}-{p} up to offset {o}" for (t, p), o in sorted(begin.items()) if t == topic
    )
    now = ", ".join(f"{t}-{p} at {o}" for (t, p), o in sorted(latest.items()) if t == topic)
    return (
        f"Topic {topic} was deleted and recreated (topic id {old_id} is now {new_id}). The "
        f"query had read {read or 'nothing of it'}; the new topic ends {now or 'nowhere'}. "
        "Records of the old topic the query had not read yet are lost."
    )
