"""InitProducerId handler (idempotent and transactional producers).

API: InitProducerId (key 22), versions 0-5.

Behaviour: with a null transactional_id (an idempotent producer) the broker hands out a new
producer id from `ProducerIdManager` (unique across restarts: id blocks are persisted before
use) with epoch 0. As in Kafka's `TransactionCoordinator.handleInitProducerId`, a new id is
given even when a v3+ request names its current producer_id and producer_epoch (KIP-360:
an idempotent producer that wants to reset its sequences simply starts over with a new id).
`transaction_timeout_ms` is ignored for idempotent producers. When the next id block cannot be
persisted (OSError) the answer is COORDINATOR_LOAD_IN_PROGRESS, which clients retry; an
exhausted id space is UNKNOWN_SERVER_ERROR.

A non-null transactional_id goes to the transaction coordinator
(`TransactionCoordinator.handle_init_producer_id`, loaded on first use): the first call for an
id allocates a producer id at epoch 0; later calls bump the epoch, fencing the previous
producer (a new producer id once the epoch is exhausted); an ONGOING transaction of the id is
fenced and aborted first, answered CONCURRENT_TRANSACTIONS (the client retries); PREPARE_*
states answer CONCURRENT_TRANSACTIONS; a timeout above `transaction.max.timeout.ms` is
INVALID_TRANSACTION_TIMEOUT; v3+ producer_id/producer_epoch must match the id's current (or
previous, after a rotation) ones, else PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4,
KIP-588). An empty transactional_id is INVALID_REQUEST, as in Kafka.

Versions: v1 no change (throttling after the response); v2 flexible; v3 producer_id and
producer_epoch in the request (KIP-360); v4 no change for idempotent producers (PRODUCER_FENCED
for transactional ones, KIP-588); v5 no change (transaction version 2, KIP-890). v6 (KIP-939
two-phase commit) is unstable in the spec and not served.

Authorization (authorizer on): a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IDEMPOTENT_WRITE on the cluster
or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED), as Kafka. A denied request allocates
nothing.

Producer id binding (onceflow, stricter than Kafka; `broker.producer_binding`): the id
answered is bound to the caller's principal, durably, before the answer (a transactional id's
epoch bump keeps its id; a rotated or first id, or an id another principal held, is bound to
the caller). When the binding cannot be made durable the answer is
COORDINATOR_LOAD_IN_PROGRESS, as for the id-block file.

Deviations: the id-block file write (temp file, fsync, rename) runs on the event loop, once
per 1000 ids.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied, may_write_some_topic
from onceflow.broker.producer_binding import bind_to_caller
from onceflow.coordinator.producer_id import ProducerIdStateError
from onceflow.coordinator.txn.coordinator import compat_error
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.init_producer_id import InitProducerIdResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest

log = logging.getLogger("onceflow.broker.init_producer_id")


def _answer(
    error: ErrorCode, producer_id: int = -1, producer_epoch: int = -1
) -> InitProducerIdResponse:
    return InitProducerIdResponse(
        throttle_time_ms=0,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )


async def _init_transactional(
    ctx: RequestContext, header: RequestHeader, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    """InitProducerId of a transactional producer, answered by the transaction coordinator."""
    version = header.request_api_version
    transactional_id = request.transactional_id
    if transactional_id == "":
        return _answer(ErrorCode.INVALID_REQUEST)
    refused = denied(ctx, ApiKey.INIT_PRODUCER_ID, "transactional_id", transactional_id)
    if refused is not None:
        log.info(
            "InitProducerId for %r from %s (%s): %s",
            transactional_id,
            ctx.peer,
            ctx.principal,
            refused.name,
        )
        return _answer(refused)
    try:
        coordinator = await ctx.broker.transactions.ensure_loaded()
    except OSError as exc:
        log.error("cannot load the transaction coordinator: %s", exc)
        return _answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    expected = (request.producer_id, request.producer_epoch) if version >= 3 else None
    result = await coordinator.handle_init_producer_id(
        transactional_id, request.transaction_timeout_ms, expected
    )
    error = compat_error(result.error, ApiKey.INIT_PRODUCER_ID, version)
    if error != ErrorCode.NONE:
        log.info("InitProducerId for %r from %s: %s", transactional_id, ctx.peer, error.name)
        return _answer(error)
    if not await _bound(ctx, result.producer_id):
        return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return _answer(ErrorCode.NONE, result.producer_id, result.producer_epoch)


async def _bound(ctx: RequestContext, producer_id: int) -> bool:
    """Bind `producer_id` to the caller, durably; False (logged) when it cannot be stored."""
    try:
        await bind_to_caller(ctx, producer_id)
    except OSError as exc:
        log.error("cannot store the owner of producer id %d: %s", producer_id, exc)
        return False
    return True


async def handle_init_producer_id(
    ctx: RequestContext, header: RequestHeader, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    """A fresh producer id with epoch 0 for an idempotent producer; transactional ids go to
    the transaction coordinator."""
    broker = ctx.broker
    transactional_id = request.transactional_id
    if transactional_id is not None:
        return await _init_transactional(ctx, header, request)
    refused = denied(ctx, ApiKey.INIT_PRODUCER_ID, "idempotent")
    if refused is not None and not may_write_some_topic(ctx):
        log.info("InitProducerId from %s (%s): %s", ctx.peer, ctx.principal, refused.name)
        return _answer(refused)
    try:
        producer_id = broker.producer_ids.generate_producer_id()
    except OSError as exc:
        log.error("cannot persist the next producer id block: %s", exc)
        return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    except ProducerIdStateError as exc:
        log.error("cannot allocate a producer id: %s", exc)
        return _answer(ErrorCode.UNKNOWN_SERVER_ERROR)
    if not await _bound(ctx, producer_id):
        return _answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    log.debug("producer id %d (epoch 0) for %s", producer_id, ctx.peer)
    return _answer(ErrorCode.NONE, producer_id, 0)
