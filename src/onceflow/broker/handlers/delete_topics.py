"""DeleteTopics handler.

API: DeleteTopics (key 20), versions 1-6.

Behaviour: deletes each topic (registry first, then its partition directories) and wakes
fetches reading it. Unknown names are UNKNOWN_TOPIC_OR_PARTITION; from v6 topics may be named
by id, unknown ids are UNKNOWN_TOPIC_ID, and a state with both or neither of name and id is
INVALID_REQUEST. With `delete.topic.enable=false` every topic gets TOPIC_DELETION_DISABLED.
An internal topic (`__consumer_offsets`, `__transaction_state`) is INVALID_REQUEST
(`coordinator.internal_topics`).

Authorization (authorizer on): DELETE on the CLUSTER allows every topic; otherwise a topic the
caller may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED before its existence is told (named by
id: with a null name), and one it may not DELETE is TOPIC_AUTHORIZATION_FAILED; such topics
are kept, as Kafka's controller.

Versions: v1 throttle_time_ms; v4 flexible; v5 error_message; v6 topics by name or id.

Deviations: deletion is synchronous, so `timeout_ms` is not used. Kafka protects its
internal topics with ACLs (TOPIC_AUTHORIZATION_FAILED) and in `kafka-topics.sh`; onceflow
also refuses at the broker, in the words Kafka uses for `__cluster_metadata`.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.coordinator.internal_topics import TopicOperation, internal_topic_refusal
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.delete_topics import DeleteTopicsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.delete_topics import DeleteTopicsRequest

_Result = DeleteTopicsResponse.DeletableTopicResult
_ZERO_UUID = uuid.UUID(int=0)
_API = ApiKey.DELETE_TOPICS


def _refusal(ctx: RequestContext, name: str, by_id: bool) -> _Result | None:
    """The answer for a topic the caller may not delete (None: it may)."""
    if denied(ctx, _API, "cluster") is None:
        return None
    hidden = denied(ctx, _API, "describe", name) is not None
    if not hidden and (
        ctx.broker.logs.topic(name) is None or denied(ctx, _API, "topic", name) is None
    ):
        return None  # an unknown topic the caller may DESCRIBE is UNKNOWN_TOPIC_OR_PARTITION
    return _Result(
        name=None if hidden and by_id else name,
        topic_id=_ZERO_UUID,
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message=None,
    )


def _delete(ctx: RequestContext, name: str | None, topic_id: uuid.UUID) -> _Result:
    broker = ctx.broker
    by_id = name is None
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
    denial = _refusal(ctx, name, by_id)
    if denial is not None:
        denial.topic_id = topic_id
        return denial
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


async def handle_delete_topics(
    ctx: RequestContext, header: RequestHeader, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    """Delete every named topic."""
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
            results.append(_delete(ctx, state.name, state.topic_id))
    else:
        for name in request.topic_names:
            results.append(_delete(ctx, name, _ZERO_UUID))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)
