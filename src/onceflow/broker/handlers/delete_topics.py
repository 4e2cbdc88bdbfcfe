"""DeleteTopics handler.

API: DeleteTopics (key 20), versions 1-6.

Behaviour: deletes each topic (registry first, then its partition directories) and wakes
fetches reading it. Unknown names are UNKNOWN_TOPIC_OR_PARTITION; from v6 topics may be named
by id, unknown ids are UNKNOWN_TOPIC_ID, and a state with both or neither of name and id is
INVALID_REQUEST. With `delete.topic.enable=false` every topic gets TOPIC_DELETION_DISABLED.
An internal topic (`__consumer_offsets`, `__transaction_state`) is INVALID_REQUEST
(`coordinator.internal_topics`).

Versions: v1 throttle_time_ms; v4 flexible; v5 error_message; v6 topics by name or id.

Deviations: deletion is synchronous, so `timeout_ms` is not used. Kafka protects its
internal topics with ACLs (TOPIC_AUTHORIZATION_FAILED) and in `kafka-topics.sh`; onceflow has
no ACLs and refuses at the broker, in the words Kafka uses for `__cluster_metadata`.
"""

from __future__ import annotations

import uuid

from onceflow.coordinator.internal_topics import TopicOperation, internal_topic_refusal
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_topics import DeleteTopicsResponse

_Result = DeleteTopicsResponse.DeletableTopicResult
_ZERO_UUID = uuid.UUID(int=0)


def _delete(broker, name: str | None, topic_id: uuid.UUID) -> _Result:
    if name is None:
        info = broker.topic_by_id(topic_id)
        if info is None:
            return _Result(
                name=None,
                topic_id=topic_id,
                error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                error_message="This server does not host this topic ID.",
            )
        name = info.name
    if not broker.config.get("delete.topic.enable"):
        return _Result(
            name=name,
            topic_id=topic_id,
            error_code=ErrorCode.TOPIC_DELETION_DISABLED,
            error_message="Topic deletion is disabled.",
        )
    refusal = internal_topic_refusal(name, TopicOperation.DELETE)
    if refusal is not None:
        return _Result(
            name=name, topic_id=topic_id, error_code=refusal[0], error_message=refusal[1]
        )
    result = broker.delete_topic(name)
    return _Result(
        name=name,
        topic_id=result.topic_id or topic_id,
        error_code=result.error,
        error_message=result.message if result.error != ErrorCode.NONE else None,
    )


async def handle_delete_topics(ctx, header, request) -> DeleteTopicsResponse:
    """Delete every named topic."""
    broker = ctx.broker
    results = []
    if header.request_api_version >= 6:
        for state in request.topics:
            has_id = state.topic_id != _ZERO_UUID
            if (state.name is None) == (not has_id):
                results.append(
                    _Result(
                        name=state.name,
                        topic_id=state.topic_id,
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message="Give either a topic name or a topic id.",
                    )
                )
                continue
            results.append(_delete(broker, state.name, state.topic_id))
    else:
        for name in request.topic_names:
            results.append(_delete(broker, name, _ZERO_UUID))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
