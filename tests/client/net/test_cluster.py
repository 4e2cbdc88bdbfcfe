"""A metadata snapshot's topic ids: the zero UUID (a broker before Metadata v10) is no id, and a
request may name topics by id only when every topic it carries has one."""

from __future__ import annotations

import uuid

from onceflow.client.net.metadata import Cluster
from onceflow.protocol.messages.metadata import MetadataResponse

_Topic = MetadataResponse.MetadataResponseTopic
_ID = uuid.UUID(int=7)


def _cluster() -> Cluster:
    response = MetadataResponse(
        controller_id=3,
        topics=[
            _Topic(name="with-id", topic_id=_ID),
            _Topic(name="without-id"),  # the zero UUID: an old broker's answer
            _Topic(name=None, topic_id=uuid.UUID(int=8)),  # a nameless entry is skipped
        ],
    )
    return Cluster.from_response(MetadataResponse.decode(response.encode(12), 12))


def test_zero_uuid_is_no_id() -> None:
    cluster = _cluster()
    assert cluster.controller_id == 3
    assert sorted(cluster.topics) == ["with-id", "without-id"]
    assert cluster.topic_id("with-id") == _ID
    assert cluster.topic_id("without-id") is None
    assert cluster.topic_names == {_ID: "with-id"}


def test_topic_ids_all_or_none() -> None:
    cluster = _cluster()
    assert cluster.topic_ids(["with-id", "with-id"]) == {"with-id": _ID}
    assert cluster.topic_ids(["with-id", "without-id"]) is None
    assert cluster.topic_ids(["with-id", "unknown"]) is None
    assert cluster.topic_ids([]) == {}
