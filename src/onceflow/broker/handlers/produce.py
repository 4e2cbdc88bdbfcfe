"""Produce handler.

API: Produce (key 0), versions 3-12 (v3+ means record batch v2 only).

Behaviour: every partition's record set is validated and appended before the first `await`,
in request order, so arrival order is append order. The record set is parsed once; its header
goes on to the validator (`log.validator.validate_produced`), the transaction check and the
log's append. Validation, in the order of Kafka's `ProduceRequest.validateRecords` (here) and
then `LogValidator` (`log.validator`): exactly one batch per partition,
with magic 2 (INVALID_RECORD otherwise, also for magic 0/1), zstd only from v7
(UNSUPPORTED_COMPRESSION_TYPE), framing (CORRUPT_MESSAGE), a batch above the topic's
`max.message.bytes` -> MESSAGE_TOO_LARGE, CRC32C and header consistency (CORRUPT_MESSAGE /
INVALID_RECORD),
client-sent control batches -> INVALID_RECORD. On a topic whose `cleanup.policy` includes
`compact` the records are decoded and every one needs a key: otherwise the whole batch is
INVALID_RECORD, with one `record_errors` entry per keyless record (its index in the batch and
Kafka's "Compacted topic cannot accept message without key in topic partition <tp>") and
Kafka's summary as error_message (v8+). On a CreateTime topic with
`message.timestamp.before.max.ms` / `after.max.ms` / `difference.max.ms` set, a record whose
timestamp lies further from the broker's clock makes the batch INVALID_TIMESTAMP, with the
same per-record errors. acks=-1 to a topic whose `min.insync.replicas` is above 1 is
NOT_ENOUGH_REPLICAS (this node is the only in-sync replica), as Kafka answers. A rejected
record set leaves nothing in the log; other partitions of the request are unaffected. A
topic whose `compression.type` is not `producer` stores the batch recompressed with its codec
(`log.validator.recompress`; producer id, epoch, sequence kept).
Then, for acks=1 and acks=-1, the handler awaits the group commit (`GroupCommitter.flushed`):
the answer comes once the data is fsynced and visible (high watermark). acks=0 gets no
response; if any partition failed, the connection is closed instead, as Kafka does, so the
client notices. Acks other than 0, 1, -1 -> INVALID_REQUIRED_ACKS on every partition.

Idempotent and transactional producers (batches with a producer id): after validation the log
checks each batch against the partition's producer state (`PartitionLog.append`, see
`log.producer_state`). A retry of a batch still in the producer's 5-batch window is answered
NONE with the original batch's base offset (and its timestamp as log_append_time on
LogAppendTime topics) and written again nowhere; the answer still waits until the original is
durable, which may not have happened yet. A sequence gap or overlap is
OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch INVALID_PRODUCER_EPOCH (at every version, as in
Kafka, whose Produce never answers PRODUCER_FENCED; librdkafka reports INVALID_PRODUCER_EPOCH
from a transactional producer's Produce to its application as _FENCED), a non-transactional batch
while the producer's transaction is open INVALID_TXN_STATE; each comes with the log's
error_message (v8+). An unknown producer id with any sequence is accepted (KIP-360), so the
broker never answers UNKNOWN_PRODUCER_ID.

Versions: v5 adds log_start_offset; v8 record_errors and error_message; v9 flexible; v10
tagged current_leader/node_endpoints (only sent with NOT_LEADER_OR_FOLLOWER, never here).

Internal topics (`__consumer_offsets`, `__transaction_state`) only take the coordinators' own
appends: a client's produce to one is INVALID_TOPIC_EXCEPTION, as Kafka answers.

Deviations: a produce to a missing topic is UNKNOWN_TOPIC_OR_PARTITION (Kafka creates topics
on Metadata requests, not on Produce). Kafka lets client id `__admin_client` write to internal
topics; onceflow lets no client. `timeout_ms` is not applied to the fsync wait. A transactional
batch in a request without transactional_id is not verified (as in Kafka, where verification
needs the id).

Authorization (authorizer on), as Kafka's `handleProduceRequest`: a request carrying a
transactional batch needs WRITE on its transactional_id (a null id is refused), else every
partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE, else its partitions
are TOPIC_AUTHORIZATION_FAILED (before any other check, so a denied client learns nothing of the
topic). Topic WRITE also admits idempotent batches (Kafka accepts it in place of
IDEMPOTENT_WRITE). A refused partition appends nothing.

Producer id binding (onceflow, stricter than Kafka; `broker.producer_binding`, on unless
`onceflow.producer.id.principal.binding.enable=false`): after the authorization checks, a
request with a batch whose producer id another principal obtained is refused whole, before
any append: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for a transactional batch,
CLUSTER_AUTHORIZATION_FAILED for an idempotent one, with an error_message (v8+).

Transactions (KIP-890 part 1 verification, `transaction.partition.verification.enable`, on by
default): when the request names a transactional_id, a transactional batch is checked against
the transaction coordinator before the append, with no `await` in between
(`BrokerTransactions.verify_produce`): the id must map to the batch's producer id
(INVALID_PRODUCER_ID_MAPPING), at the batch's epoch (a fenced producer gets
INVALID_PRODUCER_EPOCH, as Kafka answers on Produce since KIP-588: the client then aborts and
learns PRODUCER_FENCED from EndTxn), and the partition must be in the id's ONGOING transaction
(else INVALID_TXN_STATE, TRANSACTION_ABORTABLE for v11+), so a write arriving after the
transaction ended cannot open a hanging transaction. A transaction being completed (markers
in flight) answers NOT_ENOUGH_REPLICAS, Kafka's retriable stand-in for
CONCURRENT_TRANSACTIONS on Produce.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from onceflow.broker.authorization import denied, denied_names, enabled
from onceflow.broker.producer_binding import produce_refusal
from onceflow.common import BytesLike, wall_clock_ms
from onceflow.coordinator.internal_topics import TopicOperation, internal_topic_refusal
from onceflow.log.validator import ACCEPTED, Rejection, stored_form, validate_produced
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.produce import ProduceResponse
from onceflow.records.batch import (
    ATTRIBUTES_OFFSET,
    MAGIC,
    MAGIC_OFFSET,
    TRANSACTIONAL_MASK,
    BatchHeader,
    split_complete_batches,
)
from onceflow.records.errors import CorruptRecordError

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.log.partition import PartitionLog
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.produce import ProduceRequest

log = logging.getLogger("onceflow.broker.produce")

_PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_RecordError = _PartitionResponse.BatchIndexAndErrorMessage
_VALID_ACKS = (0, 1, -1)
_ZSTD = 4


def _error(
    index: int,
    error: ErrorCode,
    message: str | None = None,
    record_errors: Iterable[tuple[int, str]] = (),
) -> _PartitionResponse:
    return _PartitionResponse(
        index=index,
        error_code=error,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[
            _RecordError(batch_index=i, batch_index_error_message=text) for i, text in record_errors
        ],
        error_message=message,
    )


class _Checked(NamedTuple):
    """One partition's record set after every check: its one batch (parsed once), or why it
    may not be appended."""

    rejection: Rejection
    header: BatchHeader | None = None
    batch: memoryview | None = None


def _refused(error: ErrorCode, message: str) -> _Checked:
    return _Checked(Rejection(error, message))


def _parse(records: BytesLike | None, version: int) -> _Checked:
    """Split the record set (the produce path's one parse) and check the request's shape, as
    Kafka's `ProduceRequest.validateRecords`: exactly one v2 batch, zstd only from v7."""
    view = memoryview(records) if records is not None else memoryview(b"")
    if len(view) <= MAGIC_OFFSET:
        return _refused(
            ErrorCode.INVALID_RECORD, "produce requests v3+ need one record batch per partition"
        )
    if view[MAGIC_OFFSET] != MAGIC:
        return _refused(
            ErrorCode.INVALID_RECORD,
            f"magic {view[MAGIC_OFFSET]}: only magic 2 batches are allowed",
        )
    try:
        batches, trailing = split_complete_batches(view)
    except CorruptRecordError as exc:
        return _refused(exc.error_code, str(exc))
    if not batches:
        return _refused(ErrorCode.INVALID_RECORD, "the record batch is truncated")
    header, batch = batches[0]
    if header.compression == _ZSTD and version < 7:
        return _refused(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs produce v7 or later")
    if len(batches) > 1:
        return _refused(
            ErrorCode.INVALID_RECORD,
            f"produce requests v3+ need exactly one record batch per partition, got {len(batches)}",
        )
    if trailing:
        return _refused(ErrorCode.CORRUPT_MESSAGE, f"{trailing} bytes after the record batch")
    return _Checked(ACCEPTED, header, batch)


def _check(
    partition_log: PartitionLog, records: BytesLike | None, version: int, acks: int
) -> _Checked:
    """Every check of one partition's record set, in Kafka's order: the request's shape
    (`_parse`), the log's validator (`log.validator.validate_produced`), then acks=all against
    min.insync.replicas."""
    checked = _parse(records, version)
    if checked.header is None or checked.batch is None:  # both or neither
        return checked
    now = wall_clock_ms()
    config = partition_log.config
    rejection = validate_produced(checked.header, checked.batch, config, partition_log.name, now)
    if rejection.error == ErrorCode.NONE:
        rejection = _not_enough_replicas(partition_log, acks)
    return checked._replace(rejection=rejection)


def _not_enough_replicas(partition_log: PartitionLog, acks: int) -> Rejection:
    """acks=all to a topic whose min.insync.replicas exceeds this node's one replica."""
    required = partition_log.config.min_insync_replicas
    if acks != -1 or required <= 1:
        return ACCEPTED
    return Rejection(
        ErrorCode.NOT_ENOUGH_REPLICAS,
        f"The size of the current ISR Set(1) is insufficient to satisfy the min.isr "
        f"requirement of {required} for partition {partition_log.name}",
    )


def _is_transactional(records: BytesLike | None) -> bool:
    """Does the record set start with a transactional v2 batch? (the attributes' low byte)"""
    return (
        records is not None
        and len(records) > ATTRIBUTES_OFFSET + 1
        and records[MAGIC_OFFSET] == MAGIC
        and bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)
    )


def _request_refusal(ctx: RequestContext, request: ProduceRequest) -> ErrorCode | None:
    """Kafka's whole-request check: a request with a transactional batch needs WRITE on its
    transactional id (a null id is refused), so an unauthorized client cannot open a
    transaction that holds back the last stable offset."""
    if any(_is_transactional(p.records) for t in request.topic_data for p in t.partition_data):
        return denied(ctx, ApiKey.PRODUCE, "transactional_id", request.transactional_id)
    return None


def _refuse_all(
    ctx: RequestContext, request: ProduceRequest, error: ErrorCode, message: str | None = None
) -> ProduceResponse | None:
    """Every partition answered `error` (and `message`); nothing is appended."""
    why = f" ({message})" if message else ""
    log.info("produce from %s (%s) refused: %s%s", ctx.peer, ctx.principal, error.name, why)
    ctx.broker.metrics.produce_errors[error] += 1
    if request.acks == 0:
        if ctx.connection is not None:
            ctx.connection.close_with_error(f"acks=0 produce refused ({error.name})")
        return None
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=t.name,
                partition_responses=[_error(p.index, error, message) for p in t.partition_data],
            )
            for t in request.topic_data
        ],
        throttle_time_ms=0,
    )


async def handle_produce(
    ctx: RequestContext, header: RequestHeader, request: ProduceRequest
) -> ProduceResponse | None:
    """Validate and append every partition, then wait for durability (acks != 0)."""
    broker = ctx.broker
    unauthorized: frozenset[str] = frozenset()
    if enabled(ctx):
        refused = _request_refusal(ctx, request)
        if refused is not None:
            return _refuse_all(ctx, request, refused)
        names = (t.name for t in request.topic_data)
        unauthorized = denied_names(ctx, ApiKey.PRODUCE, "topic", names)
    foreign = produce_refusal(ctx, request)
    if foreign is not None:
        return _refuse_all(ctx, request, *foreign)
    metrics = broker.metrics
    acks = request.acks
    transactional_id = request.transactional_id
    topics: list[ProduceResponse.TopicProduceResponse] = []
    waits: list[tuple[_PartitionResponse, PartitionLog, int]] = []
    failures: list[str] = []
    for topic_data in request.topic_data:
        name = topic_data.name
        partitions: list[_PartitionResponse] = []
        topics.append(
            ProduceResponse.TopicProduceResponse(name=name, partition_responses=partitions)
        )
        for data in topic_data.partition_data:
            index = data.index
            if acks not in _VALID_ACKS:
                partitions.append(_error(index, ErrorCode.INVALID_REQUIRED_ACKS))
                metrics.produce_errors[ErrorCode.INVALID_REQUIRED_ACKS] += 1
                continue
            refusal: tuple[ErrorCode, str] | None
            if name in unauthorized:
                refusal = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"no WRITE on topic {name}")
            else:
                refusal = internal_topic_refusal(name, TopicOperation.PRODUCE)
            partition_log = None if refusal else broker.get_log(name, index)
            if partition_log is None:
                error, message = refusal or (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
                if refusal:
                    log.info(
                        "produce to %s-%d from %s rejected: %s", name, index, ctx.peer, message
                    )
                partitions.append(_error(index, error, message))
                metrics.produce_errors[error] += 1
                failures.append(f"{name}-{index}: {error.name}")
                continue
            checked = _check(partition_log, data.records, header.request_api_version, acks)
            rejection = checked.rejection
            error, message = rejection.error, rejection.message
            batch_header, batch = checked.header, checked.batch  # both set when accepted
            if batch_header is None or batch is None:  # refused (with its error): no batch
                error = error if error != ErrorCode.NONE else ErrorCode.CORRUPT_MESSAGE
            elif error == ErrorCode.NONE and transactional_id is not None:
                error, message = broker.transactions.verify_produce(
                    transactional_id, batch_header, name, index, header.request_api_version
                )
            if error == ErrorCode.NONE and batch_header is not None and batch is not None:
                stored_header, stored = stored_form(batch_header, batch, partition_log.config)
                result = partition_log.append(stored, headers=(stored_header,))
                error = ErrorCode(result.error)
                if error != ErrorCode.NONE:
                    message = result.error_message or f"append failed: {error.name}"
                elif result.duplicate:
                    metrics.duplicate_batches += 1
                    log.debug(
                        "duplicate batch to %s-%d from %s answered with offset %d",
                        name,
                        index,
                        ctx.peer,
                        result.base_offset,
                    )
            if error != ErrorCode.NONE:
                log.info("produce to %s-%d from %s rejected: %s", name, index, ctx.peer, message)
                partitions.append(_error(index, error, message, rejection.record_errors))
                failures.append(f"{name}-{index}: {error.name}")
                metrics.produce_errors[error] += 1
                continue
            response = _PartitionResponse(
                index=index,
                error_code=ErrorCode.NONE,
                base_offset=result.base_offset,
                log_append_time_ms=result.log_append_time,
                log_start_offset=result.log_start_offset,
                record_errors=[],
                error_message=None,
            )
            partitions.append(response)
            waits.append((response, partition_log, result.next_offset))
    if acks == 0:
        for _, partition_log, _ in waits:
            broker.committer.request_flush(partition_log)
        if failures and ctx.connection is not None:
            ctx.connection.close_with_error("acks=0 produce failed (" + ", ".join(failures) + ")")
        return None
    if waits:
        outcomes = await asyncio.gather(
            *(broker.committer.flushed(log_, offset) for _, log_, offset in waits)
        )
        for (response, _, _), outcome in zip(waits, outcomes, strict=True):
            if outcome != ErrorCode.NONE:
                response.error_code = outcome
                response.base_offset = -1
                response.error_message = "the log could not be made durable"
                metrics.produce_errors[outcome] += 1
    return ProduceResponse(responses=topics, throttle_time_ms=0)
