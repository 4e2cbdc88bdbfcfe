"""`__transaction_state`: the compacted topic holding every transactional id's state.

`TransactionStateLog` creates the topic on demand (`transaction.state.log.num.partitions`
partitions, `cleanup.policy=compact`, `flush.on.ack=true` whatever the broker default, so an
append is durable when `append` returns NONE), maps a transactional id to its partition, appends
state records and waits for the group-commit fsync, and reads partitions back on load.

The coordinator epoch: Kafka takes it from the partition leader epoch of the state partition,
which grows with every leader change. A single node has none, so the epoch is kept in
`<first data dir>/transaction-coordinator-epoch` and bumped on every load; markers carry it, so
markers written after a restart always carry a higher coordinator epoch than earlier ones.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

from onceflow.coordinator.internal_topics import TRANSACTION_STATE_TOPIC
from onceflow.coordinator.topic import CoordinatorTopic
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.log_codec import build_state_batch, iter_state_records
from onceflow.coordinator.txn.metadata import TxnTransitMetadata
from onceflow.log.fsutil import read_int_file, write_file_atomically
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode

__all__ = ["COORDINATOR_EPOCH_FILE", "TransactionStateLog"]

logger = logging.getLogger("onceflow.coordinator.txn")

COORDINATOR_EPOCH_FILE = "transaction-coordinator-epoch"
_READ_BYTES = 1 << 20

# append errors -> what the client is told (Kafka's TransactionStateManager mapping)
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


class TransactionStateLog(CoordinatorTopic):
    """Durable appends to and reads of `__transaction_state`."""

    def __init__(self, logs: LogManager, config: TxnConfig) -> None:
        super().__init__(
            logs,
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            {
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
                "flush.on.ack": "true",
            },
        )
        self.config = config

    async def append(
        self, transactional_id: str, transit: TxnTransitMetadata, now_ms: int
    ) -> ErrorCode:
        """Append the new state of `transactional_id` (a tombstone for DEAD) and wait until it
        is fsynced. NONE, or the error the client should see."""
        partition = self.partition_for(transactional_id)
        log = self.logs.get_log(TRANSACTION_STATE_TOPIC, partition)
        if log is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        result = log.append(build_state_batch(transactional_id, transit, now_ms), now_ms=now_ms)
        error = result.error
        if error == ErrorCode.NONE:
            error = await self.logs.committer.flushed(log, result.next_offset)
        if error != ErrorCode.NONE:
            logger.warning(
                "appending %s for transactional id %r to %s-%d failed: %s",
                transit.txn_state.name,
                transactional_id,
                TRANSACTION_STATE_TOPIC,
                partition,
                error.name,
            )
            return _APPEND_ERRORS.get(error, ErrorCode.UNKNOWN_SERVER_ERROR)
        return ErrorCode.NONE

    def read_partition(self, partition: int) -> Iterator[tuple[str, TxnTransitMetadata | None]]:
        """Every `(transactional_id, state or None for a tombstone)` of one partition, in
        offset order, up to its high watermark."""
        log = self.logs.get_log(TRANSACTION_STATE_TOPIC, partition)
        if log is None:
            return
        offset = log.log_start_offset
        while offset < log.high_watermark:
            result = log.read(offset, _READ_BYTES)
            if result.error != ErrorCode.NONE:
                raise OSError(f"reading {TRANSACTION_STATE_TOPIC}-{partition}: {result.error.name}")
            if not result.records:
                break
            last = offset - 1
            for record_offset, transactional_id, transit in iter_state_records(result.records):
                last = record_offset
                if record_offset >= offset:
                    yield transactional_id, transit
            if last < offset:
                break  # no progress: nothing more below the high watermark
            offset = last + 1

    def bump_coordinator_epoch(self) -> int:
        """Persist and return the coordinator epoch for this load (one more than the last)."""
        path = os.path.join(self.logs.log_dirs[0], COORDINATOR_EPOCH_FILE)
        previous = read_int_file(path)
        if previous is None and os.path.exists(path):
            raise OSError(f"{path} is unreadable: refusing to reuse a coordinator epoch")
        epoch = 0 if previous is None else previous + 1
        write_file_atomically(path, f"{epoch}\n".encode("ascii"))
        return epoch
