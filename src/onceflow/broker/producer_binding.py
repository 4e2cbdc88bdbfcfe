"""Producer ids bound to principals (stricter than Kafka; docs/security.md, docs/deviations.md).

Kafka lets any client that may write a topic (or a transactional id) send a batch, an
AddPartitionsToTxn or an EndTxn with another producer's id and epoch, so it can inject records
into that producer's open transaction, commit or abort it, or fence it. onceflow binds each
producer id to the principal whose InitProducerId obtained it (`bind`, durable in
`security.producer_id_owners` before the id is answered; a transactional id's epoch bump keeps
the id, a rotation to a new id binds the new one, both to the caller). Produce,
AddPartitionsToTxn (v0-3), AddOffsetsToTxn, TxnOffsetCommit and EndTxn naming a producer id
owned by another principal are refused whole, before anything changes (no append, no
coordinator or group state, no write), with one info line naming the peer, the principal and
the id:

- the transactional APIs, and a Produce carrying a transactional batch:
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED (fatal for the producer in librdkafka and the Java
  client, as when the client lacks WRITE on the transactional id);
- a Produce whose batches are idempotent only: CLUSTER_AUTHORIZATION_FAILED (what an idempotent
  producer without IDEMPOTENT_WRITE is answered; fatal in the Java client, a permanent error in
  librdkafka), with an error_message saying why (v8+).

INVALID_PRODUCER_ID_MAPPING was not chosen: clients treat it as abortable and retry with a new
epoch, which would hide the refusal. The checks run after the ACL checks (an ACL denial keeps
its own error) and whether or not the authorizer is on. Not checked: WriteTxnMarkers and
AddPartitionsToTxn v4+ (broker-to-broker APIs that need CLUSTER_ACTION), and requests with no
producer id (-1). The cost on the produce path is one dict lookup per partition.

`onceflow.producer.id.principal.binding.enable=false` turns the binding off (Kafka's
behaviour): nothing is checked or written; records already in the file are kept and apply
again when it is turned back on (ids handed out meanwhile have no record: `User:ANONYMOUS`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING, Protocol

from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import (
    ATTRIBUTES_OFFSET,
    MAGIC,
    MAGIC_OFFSET,
    PRODUCER_ID_OFFSET,
    TRANSACTIONAL_MASK,
)
from onceflow.security.acl import ANONYMOUS_PRINCIPAL
from onceflow.security.producer_id_owners import ProducerIdOwners, ProducerIdOwnersCorruptError

if TYPE_CHECKING:
    from onceflow.protocol.messages.produce import ProduceRequest

__all__ = [
    "BINDING_CONFIG",
    "ProducerIdBinding",
    "bind_to_caller",
    "open_binding",
    "produce_refusal",
    "refusal",
]

BINDING_CONFIG = "onceflow.producer.id.principal.binding.enable"
_INT64 = struct.Struct(">q")

log = logging.getLogger("onceflow.broker.producer_binding")


class ProducerIdBinding:
    """The owners of producer ids, and their durable updates (one at a time, off the loop)."""

    def __init__(self, owners: ProducerIdOwners) -> None:
        self.owners = owners
        self._lock = asyncio.Lock()

    def foreign_owner(self, producer_id: int, principal: str) -> str | None:
        """The owner of `producer_id` when it is not `principal`, else None."""
        if producer_id < 0:
            return None
        owner = self.owners.owner(producer_id)
        return None if owner == principal else owner

    async def bind(self, producer_id: int, principal: str) -> None:
        """Make `principal` the owner of `producer_id`, durable on return (OSError if not)."""
        async with self._lock:
            if self.owners.needs_record(producer_id, principal):
                await asyncio.to_thread(self.owners.bind, producer_id, principal)


def open_binding(data_dir: str, enabled: bool) -> ProducerIdBinding | None:
    """The binding of the data directory, None when switched off. OSError when the owners file
    cannot be read back (starting without it would let any principal use any id)."""
    if not enabled:
        return None
    try:
        owners = ProducerIdOwners(data_dir)
    except ProducerIdOwnersCorruptError as exc:
        raise OSError(str(exc)) from exc
    log.info("producer ids bound to principals: %d owner record(s)", len(owners))
    return ProducerIdBinding(owners)


class _BindingHolder(Protocol):
    producer_id_binding: ProducerIdBinding | None


class Caller(Protocol):
    """What the checks below read of a `broker.context.RequestContext` (named structurally:
    the broker state imports this module)."""

    @property
    def broker(self) -> _BindingHolder: ...
    @property
    def principal(self) -> str: ...
    @property
    def peer(self) -> str: ...


async def bind_to_caller(ctx: Caller, producer_id: int) -> None:
    """Bind `producer_id` to the caller (no-op with the binding off); OSError if not durable."""
    binding = ctx.broker.producer_id_binding
    if binding is not None:
        await binding.bind(producer_id, ctx.principal)


def refusal(ctx: Caller, api_name: str, producer_id: int) -> ErrorCode | None:
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED (logged) when `producer_id` belongs to another
    principal; None when the caller may use it."""
    binding = ctx.broker.producer_id_binding
    owner = None if binding is None else binding.foreign_owner(producer_id, ctx.principal)
    if owner is None:
        return None
    log.info(
        "%s from %s (%s) refused: producer id %d belongs to %s",
        api_name,
        ctx.peer,
        ctx.principal,
        producer_id,
        owner,
    )
    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def produce_refusal(ctx: Caller, request: ProduceRequest) -> tuple[ErrorCode, str] | None:
    """(error, message) when a batch of the Produce request carries a producer id owned by
    another principal, else None. Reads each partition's batch header in place; not logged
    (the produce handler logs its refusal)."""
    binding = ctx.broker.producer_id_binding
    if binding is None or (ctx.principal == ANONYMOUS_PRINCIPAL and not len(binding.owners)):
        return None
    for topic in request.topic_data:
        for data in topic.partition_data:
            records = data.records
            if records is None or len(records) <= PRODUCER_ID_OFFSET + 8:
                continue
            if records[MAGIC_OFFSET] != MAGIC:
                continue  # refused by the produce checks
            producer_id = _INT64.unpack_from(records, PRODUCER_ID_OFFSET)[0]
            if binding.foreign_owner(producer_id, ctx.principal) is None:
                continue
            transactional = records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK
            error = (
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                if transactional
                else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            )
            return error, f"producer id {producer_id} belongs to another principal"
    return None
