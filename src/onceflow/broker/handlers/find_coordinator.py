"""FindCoordinator handler.

API: FindCoordinator (key 10), versions 0-5.

Behaviour: every coordinator lives on this node, so a key is answered with this broker's
advertised address once its coordinator can serve it, else with an error and node -1:
- key_type 0 (GROUP): the group coordinator's `ensure_offsets_topic()` (creates
  `__consumer_offsets` on first use, as Kafka does); NONE -> this node, otherwise
  COORDINATOR_NOT_AVAILABLE (retriable).
- key_type 1 (TRANSACTION): the transaction coordinator is loaded on first use (creating
  `__transaction_state`); then its `find_coordinator(key)`: NONE -> this node, or
  COORDINATOR_LOAD_IN_PROGRESS while it loads; COORDINATOR_NOT_AVAILABLE when the state log
  cannot be created or read.
- any other key type: INVALID_REQUEST (Kafka's `CoordinatorType.forId` rejects it).

Versions: v0 has only `key` (a group); v1 key_type, throttle_time_ms, error_message; v3
flexible; v4 (KIP-699) batches keys in `coordinator_keys` and answers one `coordinators`
entry per key; v5 only tells the broker the client understands TRANSACTION_ABORTABLE.

Authorization (authorizer on): DESCRIBE on the group or transactional id, else
GROUP_/TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that key (nothing is created or loaded).

Deviations: v6 (share-group keys, KIP-932) is not served. An empty key is answered like any
other key (Kafka too; the coordinator APIs then reject it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.find_coordinator import FindCoordinatorResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.find_coordinator import FindCoordinatorRequest

log = logging.getLogger("onceflow.broker.find_coordinator")

GROUP = 0
TRANSACTION = 1
_BATCHED_MIN_VERSION = 4
_MESSAGES = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading.",
    ErrorCode.INVALID_REQUEST: "Unknown coordinator key type.",
}


_CHECKS = {GROUP: "group", TRANSACTION: "transactional_id"}


async def _lookup(ctx: RequestContext, key: str, key_type: int) -> ErrorCode:
    """NONE when this node coordinates `key` and the caller may DESCRIBE it, else the error to
    answer."""
    broker = ctx.broker
    if key_type in _CHECKS:
        refused = denied(ctx, ApiKey.FIND_COORDINATOR, _CHECKS[key_type], key)
        if refused is not None:
            return refused
    if key_type == GROUP:
        group = getattr(broker, "group_coordinator", None)
        if group is None or group.ensure_offsets_topic() != ErrorCode.NONE:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE
    if key_type == TRANSACTION:
        try:
            coordinator = await broker.transactions.ensure_loaded()
        except OSError as exc:
            log.error("cannot load the transaction coordinator: %s", exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return coordinator.find_coordinator(key)
    return ErrorCode.INVALID_REQUEST


async def handle_find_coordinator(
    ctx: RequestContext, header: RequestHeader, request: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    """Answer where the coordinator of each key is: this node, or an error."""
    broker = ctx.broker
    version = header.request_api_version
    key_type = request.key_type if version >= 1 else GROUP
    address = ctx.advertised
    if version < _BATCHED_MIN_VERSION:
        error = await _lookup(ctx, request.key, key_type)
        found = error == ErrorCode.NONE
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            error_code=error,
            error_message=None if found else _MESSAGES.get(error, error.name),
            node_id=broker.node_id if found else -1,
            host=address.host if found else "",
            port=address.port if found else -1,
        )
    coordinators = []
    for key in request.coordinator_keys:
        error = await _lookup(ctx, key, key_type)
        found = error == ErrorCode.NONE
        coordinators.append(
            FindCoordinatorResponse.Coordinator(
                key=key,
                node_id=broker.node_id if found else -1,
                host=address.host if found else "",
                port=address.port if found else -1,
                error_code=error,
                error_message=None if found else _MESSAGES.get(error, error.name),
            )
        )
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
