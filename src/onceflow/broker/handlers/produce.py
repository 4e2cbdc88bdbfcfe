"""Produce handler.

API: Produce (key 0), versions 3-12 (v3+ means record batch v2 only).

Behaviour: every partition's record set is validated and appended before the first `await`,
in request order, so arrival order is append order. Validation, in the order of Kafka's
`ProduceRequest.validateRecords` and then `LogValidator`: exactly one batch per partition,
with magic 2 (INVALID_RECORD otherwise, also for magic 0/1), zstd only from v7
(UNSUPPORTED_COMPRESSION_TYPE), framing (CORRUPT_MESSAGE), a batch above the topic's
`max.message.bytes` -> MESSAGE_TOO_LARGE, CRC32C and header consistency (CORRUPT_MESSAGE /
INVALID_RECORD),
client-sent control batches -> INVALID_RECORD, on compacted topics a key on every record. A
rejected record set leaves nothing in the log; other partitions of the request are unaffected.
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
OUT_OF_ORDER_SEQUENCE_NUMBER, a stale epoch INVALID_PRODUCER_EPOCH, a non-transactional batch
while the producer's transaction is open INVALID_TXN_STATE; each comes with the log's
error_message (v8+). An unknown producer id with any sequence is accepted (KIP-360), so the
broker never answers UNKNOWN_PRODUCER_ID.

Versions: v5 adds log_start_offset; v8 record_errors and error_message; v9 flexible; v10
tagged current_leader/node_endpoints (only sent with NOT_LEADER_OR_FOLLOWER, never here).

Internal topics (`__consumer_offsets`, `__transaction_state`) only take the coordinators' own
appends: a client's produce to one is INVALID_TOPIC_EXCEPTION, as Kafka answers.

Deviations: a produce to a missing topic is UNKNOWN_TOPIC_OR_PARTITION (Kafka creates topics
on Metadata requests, not on Produce). Kafka lets client id `__admin_client` write to internal
topics; onceflow lets no client. `timeout_ms` is not applied to the fsync wait. No ACLs,
so no TRANSACTIONAL_ID_AUTHORIZATION_FAILED / CLUSTER_AUTHORIZATION_FAILED. A transactional
batch in a request without transactional_id is not verified (as in Kafka, where verification
needs the id).

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

from onceflow.coordinator.internal_topics import TopicOperation, internal_topic_refusal
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.produce import ProduceResponse
from onceflow.records.batch import (
    MAGIC,
    MAGIC_OFFSET,
    parse_header,
    split_complete_batches,
    validate_batch,
)
from onceflow.records.errors import CorruptRecordError

log = logging.getLogger("onceflow.broker.produce")

_PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_VALID_ACKS = (0, 1, -1)
_ZSTD = 4


def _error(index: int, error: ErrorCode, message: str | None = None) -> _PartitionResponse:
    return _PartitionResponse(
        index=index,
        error_code=error,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[],
        error_message=message,
    )


def _validate(partition_log, records, version: int) -> tuple[ErrorCode, str | None]:
    """Check one partition's record set, in Kafka's order; (NONE, None) when it may be
    appended. First `ProduceRequest.validateRecords` (one v2 batch, zstd needs v7+), then the
    log's checks (size, CRC, header consistency, control batches)."""
    view = memoryview(records) if records is not None else memoryview(b"")
    if len(view) <= MAGIC_OFFSET:
        return ErrorCode.INVALID_RECORD, "produce requests v3+ need one record batch per partition"
    if view[MAGIC_OFFSET] != MAGIC:
        return (
            ErrorCode.INVALID_RECORD,
            f"magic {view[MAGIC_OFFSET]}: only magic 2 batches are allowed",
        )
    try:
        batches, trailing = split_complete_batches(view)
    except CorruptRecordError as exc:
        return exc.error_code, str(exc)
    if not batches:
        return ErrorCode.INVALID_RECORD, "the record batch is truncated"
    header, batch = batches[0]
    if header.compression == _ZSTD and version < 7:
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "zstd needs produce v7 or later"
    if len(batches) > 1:
        return ErrorCode.INVALID_RECORD, (
            f"produce requests v3+ need exactly one record batch per partition, got {len(batches)}"
        )
    if trailing:
        return ErrorCode.CORRUPT_MESSAGE, f"{trailing} bytes after the record batch"
    limit = partition_log.config.max_message_bytes
    if header.total_size > limit:
        return ErrorCode.MESSAGE_TOO_LARGE, (
            f"record batch of {header.total_size} bytes exceeds max.message.bytes={limit}"
        )
    compacted = "compact" in partition_log.config.cleanup_policy
    error = validate_batch(header, batch, from_client=True, check_records=compacted)
    if error is not None and error != ErrorCode.NONE:
        return ErrorCode(error), f"record batch rejected: {ErrorCode(error).name}"
    return ErrorCode.NONE, None


async def handle_produce(ctx, header, request) -> ProduceResponse | None:
    """Validate and append every partition, then wait for durability (acks != 0)."""
    broker = ctx.broker
    metrics = broker.metrics
    acks = request.acks
    transactional_id = request.transactional_id
    topics: list[ProduceResponse.TopicProduceResponse] = []
    waits: list[tuple[_PartitionResponse, object, int]] = []
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
            error, message = _validate(partition_log, data.records, header.request_api_version)
            if error == ErrorCode.NONE and transactional_id is not None:
                error, message = broker.transactions.verify_produce(
                    transactional_id,
                    parse_header(data.records),
                    name,
                    index,
                    header.request_api_version,
                )
            if error == ErrorCode.NONE:
                result = partition_log.append(data.records)
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
                partitions.append(_error(index, error, message))
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
    broker.appended([log_ for _, log_, _ in waits])
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
