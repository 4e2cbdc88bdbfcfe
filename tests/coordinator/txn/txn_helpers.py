"""Shared helpers for the transaction coordinator tests: a real LogManager in a temp dir."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping

from onceflow.common import TopicPartition
from onceflow.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from onceflow.coordinator.producer_id import ProducerIdManager
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.coordinator import TransactionCoordinator
from onceflow.coordinator.txn.markers import TxnMarkerChannel
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode
from onceflow.records.batch import iter_batches
from onceflow.records.control import ControlRecord, parse_control_record

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TEST_CONFIG = TxnConfig(transaction_state_log_num_partitions=3, offsets_topic_num_partitions=2)


class Clock:
    """A settable clock in epoch milliseconds."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class GatedChannel:
    """A marker channel that waits for `gate` before delegating (or forever if never set)."""

    def __init__(self, inner: TxnMarkerChannel) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.calls = 0

    async def write_markers(self, marker, parts):
        self.calls += 1
        await self.gate.wait()
        return await self.inner.write_markers(marker, parts)


def open_logs(path: str, topics: Mapping[str, int] = {"t": 2}) -> LogManager:  # noqa: B006
    logs = LogManager(path)
    logs.start()
    for name, count in topics.items():
        if logs.topic(name) is None:
            logs.create_topic(name, count)
    return logs


@contextlib.asynccontextmanager
async def coordinator_env(
    path: str,
    *,
    config: TxnConfig = TEST_CONFIG,
    clock: Clock | None = None,
    topics: Mapping[str, int] = {"t": 2},  # noqa: B006
    channel=None,
    clean: bool = True,
) -> AsyncIterator[TransactionCoordinator]:
    """A loaded coordinator over a LogManager in `path`; `clean=False` abandons the logs
    without a clean shutdown (a crash) once the block exits."""
    logs = open_logs(path, topics)
    coordinator = TransactionCoordinator(
        logs,
        ProducerIdManager(path),
        config,
        marker_channel=channel(logs) if channel else None,
        clock=clock or Clock(),
    )
    await coordinator.load()
    try:
        yield coordinator
    finally:
        await coordinator.close()
        if clean:
            await logs.shutdown()
        else:
            await logs.committer.close()  # stop the fsync thread; files stay as a crash leaves them


def markers_on(logs: LogManager, tp: TopicPartition) -> list[tuple[int, int, ControlRecord]]:
    """`(producer_id, producer_epoch, control record)` of every marker in a partition."""
    log = logs.get_log(tp.topic, tp.partition)
    found, offset = [], log.log_start_offset
    while offset < log.log_end_offset:  # reads stay within one segment: read until the end
        result = log.read(offset, 1 << 20, upper_bound_offset=log.log_end_offset)
        assert result.error == ErrorCode.NONE and result.records
        for header, view in iter_batches(result.records):
            if header.is_control:
                found.append(
                    (header.producer_id, header.producer_epoch, parse_control_record(view))
                )
            offset = header.last_offset + 1
    return found


def state_records(coordinator: TransactionCoordinator, transactional_id: str) -> list:
    """Every state record (None for a tombstone) of `transactional_id`, in log order."""
    partition = coordinator.partition_for(transactional_id)
    return [
        transit
        for tid, transit in coordinator.state_log.read_partition(partition)
        if tid == transactional_id
    ]


def txn_state_log_exists(logs: LogManager) -> bool:
    return logs.topic(TRANSACTION_STATE_TOPIC) is not None


async def begin(
    coordinator: TransactionCoordinator,
    tid: str = "tx",
    parts: Iterable[TopicPartition] = (TP0, TP1),
    timeout_ms: int = 60_000,
):
    """InitProducerId then AddPartitions; returns the InitProducerId result."""
    init = await coordinator.handle_init_producer_id(tid, timeout_ms)
    assert init.error == ErrorCode.NONE, init
    added = await coordinator.handle_add_partitions(
        tid, init.producer_id, init.producer_epoch, list(parts)
    )
    assert set(added.values()) == {ErrorCode.NONE}, added
    return init
