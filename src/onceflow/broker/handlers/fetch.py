"""Fetch handler (consumers).

API: Fetch (key 1), versions 4-16.

Behaviour: reads whole batches below the high watermark (isolation_level 0, read_uncommitted) or
the last stable offset (1, read_committed: the first offset of the oldest open transaction,
capped by the high watermark) for each partition in request order. Sizes follow Kafka: each
partition gets at most `partition_max_bytes`, the response at most `max_bytes` (capped by the
broker's `fetch.max.bytes`), except that the first batch of the first partition with data is
returned whole even when larger (KIP-74). Long polling: when fewer than `min_bytes` were read
and no partition errored, the fetch waits up to `max_wait_ms`, woken whenever a requested
partition's high watermark moves, and reads again. A fetch offset below the log start or above
the log end is OFFSET_OUT_OF_RANGE; an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; an
error answers at once. preferred_read_replica is -1. Every partition reports last_stable_offset.
aborted_transactions is null for read_uncommitted; for read_committed it lists `(producer_id,
first_offset)` of every aborted transaction overlapping the returned range `[fetch_offset,
offset after the last returned batch)`, from the segments' `.txnindex`
(`PartitionLog.collect_aborted_transactions`, Kafka's `collectAbortedTransactions`), so the
client can drop aborted records; empty when nothing was returned. Long polls are also woken when
a partition's last stable offset moves (a transaction completes), see `broker.state`.

Fetch sessions (KIP-227, v7+): this broker keeps no session cache, as a broker with
`max.incremental.fetch.session.cache.slots=0`: a full fetch (epoch 0 or -1) is answered in full
with session_id 0, so clients keep sending full fetches; an incremental fetch (epoch > 0) gets
FETCH_SESSION_ID_NOT_FOUND and the client falls back to a full one. forgotten_topics_data is
therefore ignored.

Versions: v5 log_start_offset; v7 sessions; v9 current_leader_epoch (not checked: one node,
epoch 0); v11 rack_id/preferred_read_replica; v12 flexible; v13 topics named by topic id
(an unknown id is UNKNOWN_TOPIC_ID); v15 replica_state replaces replica_id; v16 tagged
node_endpoints (only sent with NOT_LEADER_OR_FOLLOWER, never here).

Authorization (authorizer on): READ on each topic, else its partitions are
TOPIC_AUTHORIZATION_FAILED (nothing read), as Kafka.

Deviations: current_leader_epoch and last_fetched_epoch are not validated (no leader changes).
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_names, enabled
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.fetch import FetchResponse
from onceflow.records.batch import LAST_OFFSET_DELTA_OFFSET, LENGTH_OFFSET, LOG_OVERHEAD

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.log.partition import PartitionLog
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.fetch import FetchRequest

_TopicResponse = FetchResponse.FetchableTopicResponse
_PartitionData = _TopicResponse.PartitionData
_READ_COMMITTED = 1
_FULL_FETCH_EPOCHS = (0, -1)  # INITIAL_EPOCH, FINAL_EPOCH
_FIRST_TOPIC_ID_VERSION = 13
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_AbortedTransaction = _PartitionData.AbortedTransaction


def _partition_error(index: int, error: ErrorCode) -> _PartitionData:
    return _PartitionData(
        partition_index=index,
        error_code=error,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
    )


def _end_offset(records: bytes | memoryview) -> int:
    """The offset after the last batch of a record set read from the log (whole batches)."""
    pos = last = 0
    end = len(records)
    while end - pos >= LOG_OVERHEAD:
        last = pos
        pos += LOG_OVERHEAD + _INT32.unpack_from(records, pos + LENGTH_OFFSET)[0]
    base: int = _INT64.unpack_from(records, last)[0]
    delta: int = _INT32.unpack_from(records, last + LAST_OFFSET_DELTA_OFFSET)[0]
    return base + delta + 1


def _aborted(
    partition_log: PartitionLog, fetch_offset: int, records: bytes | memoryview
) -> list[_AbortedTransaction]:
    """AbortedTransaction entries overlapping the records returned to a read_committed fetch."""
    if not records:
        return []
    return [
        _AbortedTransaction(producer_id=producer_id, first_offset=first_offset)
        for producer_id, first_offset in partition_log.collect_aborted_transactions(
            fetch_offset, _end_offset(records)
        )
    ]


def _read(
    broker: BrokerState,
    request: FetchRequest,
    version: int,
    read_committed: bool,
    max_bytes: int,
    unauthorized: frozenset[str] = frozenset(),
) -> tuple[list[_TopicResponse], int, bool]:
    """One pass over every requested partition: (topic responses, bytes read, any error)."""
    topics: list[_TopicResponse] = []
    total = 0
    errored = False
    remaining = max_bytes
    min_one_message = True
    by_id = version >= _FIRST_TOPIC_ID_VERSION
    for fetch_topic in request.topics:
        if by_id:
            info = broker.topic_by_id(fetch_topic.topic_id)
            name = info.name if info is not None else None
            missing = ErrorCode.UNKNOWN_TOPIC_ID
            entry = _TopicResponse(topic_id=fetch_topic.topic_id)
        else:
            name = fetch_topic.topic
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            entry = _TopicResponse(topic=name)
        partitions: list[_PartitionData] = []
        entry.partitions = partitions
        topics.append(entry)
        for fetch_partition in fetch_topic.partitions:
            index = fetch_partition.partition
            if name in unauthorized:
                partitions.append(_partition_error(index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                errored = True
                continue
            partition_log = broker.get_log(name, index) if name is not None else None
            if partition_log is None:
                topic_known = name is not None and broker.logs.topic(name) is not None
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic_known else missing
                partitions.append(_partition_error(index, error))
                errored = True
                continue
            upper = partition_log.last_stable_offset if read_committed else None
            limit = min(fetch_partition.partition_max_bytes, remaining)
            result = partition_log.read(
                fetch_partition.fetch_offset,
                limit,
                upper,
                min_one_message=min_one_message,
            )
            if result.error != ErrorCode.NONE:
                partitions.append(_partition_error(index, ErrorCode(result.error)))
                errored = True
                continue
            size = len(result.records)
            if size:
                total += size
                remaining = max(0, remaining - size)
                min_one_message = False
            partitions.append(
                _PartitionData(
                    partition_index=index,
                    error_code=ErrorCode.NONE,
                    high_watermark=result.high_watermark,
                    last_stable_offset=result.last_stable_offset,
                    log_start_offset=result.log_start_offset,
                    aborted_transactions=(
                        _aborted(partition_log, fetch_partition.fetch_offset, result.records)
                        if read_committed
                        else None
                    ),
                    preferred_read_replica=-1,
                    records=result.records,
                )
            )
    return topics, total, errored


def _watched(broker: BrokerState, request: FetchRequest, version: int) -> list[TopicPartition]:
    """The partitions a long poll waits on."""
    if version < _FIRST_TOPIC_ID_VERSION:
        return [TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions]
    watched: list[TopicPartition] = []
    for fetch_topic in request.topics:
        info = broker.topic_by_id(fetch_topic.topic_id)
        if info is not None:
            watched += [TopicPartition(info.name, p.partition) for p in fetch_topic.partitions]
    return watched


def _unauthorized_topics(
    ctx: RequestContext, request: FetchRequest, version: int
) -> frozenset[str]:
    """The requested topics the caller may not READ (empty with the authorizer off)."""
    if not enabled(ctx):
        return frozenset()
    if version >= _FIRST_TOPIC_ID_VERSION:
        infos = (ctx.broker.topic_by_id(t.topic_id) for t in request.topics)
        names = [info.name for info in infos if info is not None]
    else:
        names = [t.topic for t in request.topics]
    return denied_names(ctx, ApiKey.FETCH, "topic", names)


async def handle_fetch(
    ctx: RequestContext, header: RequestHeader, request: FetchRequest
) -> FetchResponse:
    """Read, and long-poll until min_bytes, an error, or max_wait_ms."""
    broker = ctx.broker
    version = header.request_api_version
    if version >= 7 and request.session_epoch not in _FULL_FETCH_EPOCHS:
        return FetchResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            session_id=0,
            responses=[],
        )
    read_committed = request.isolation_level == _READ_COMMITTED
    max_bytes = min(request.max_bytes, broker.config.get("fetch.max.bytes"))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    unauthorized = _unauthorized_topics(ctx, request, version)
    watched = _watched(broker, request, version)
    while True:
        topics, total, errored = _read(
            broker, request, version, read_committed, max_bytes, unauthorized
        )
        remaining = deadline - loop.time()
        if total >= request.min_bytes or errored or remaining <= 0 or broker.stopping:
            break
        if not watched:
            break
        wakeup = broker.notifier.watch(watched)
        try:
            await asyncio.wait_for(wakeup, remaining)
        except TimeoutError:
            pass
        finally:
            broker.notifier.unwatch(watched, wakeup)
    return FetchResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=topics
    )
