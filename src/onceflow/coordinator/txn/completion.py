"""Second phase of a transaction: markers to every partition, then COMPLETE_COMMIT/ABORT.

`TxnCompleter` (the completion half of Kafka's `TransactionMarkerChannelManager`) takes a
transaction whose PREPARE_COMMIT/PREPARE_ABORT is durable, prepares the COMPLETE_* transit (the
pending state keeps other requests of the id at CONCURRENT_TRANSACTIONS), writes the markers
through the `TxnMarkerChannel` - retrying partitions whose logs fail, skipping those that are
gone or refuse the marker for good - and appends COMPLETE_* before completing the transition.
Whatever goes wrong (an exception from the channel or the state log) is logged and the
completion retried with backoff: a durable PREPARE_* always ends in COMPLETE_*. Only
cancellation (shutdown) stops it, leaving PREPARE_* in the log for the next load to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from onceflow.common import TopicPartition
from onceflow.coordinator.txn.markers import TxnMarker, TxnMarkerChannel
from onceflow.coordinator.txn.metadata import TransactionMetadata, TxnTransitMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.coordinator.txn.state_log import TransactionStateLog
from onceflow.protocol.errors import ErrorCode

__all__ = ["TxnCompleter"]

log = logging.getLogger("onceflow.coordinator.txn")

# marker outcomes that retrying will not change: the partition is skipped (and logged)
MARKER_GIVE_UP = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # the topic was deleted
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ErrorCode.INVALID_RECORD,
        ErrorCode.INVALID_TXN_STATE,
    }
)
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 5.0


class TxnCompleter:
    """Runs one background task per transaction being completed."""

    def __init__(
        self, state_log: TransactionStateLog, markers: TxnMarkerChannel, clock: Callable[[], int]
    ) -> None:
        self.state_log = state_log
        self.markers = markers
        self.clock = clock
        self._tasks: set[asyncio.Task[None]] = set()
        # transactions completed since this coordinator started (observability:
        # broker.metrics_eos), by outcome
        self.committed = 0
        self.aborted = 0

    def start(self, md: TransactionMetadata, coordinator_epoch: int) -> None:
        """Prepare COMPLETE_* on `md` (in PREPARE_COMMIT/ABORT) and start writing markers."""
        partitions = frozenset(md.topic_partitions)
        epoch = md.producer_epoch
        complete = md.prepare_complete(self.clock())
        task = asyncio.create_task(self._run(md, complete, partitions, epoch, coordinator_epoch))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    async def wait_idle(self) -> None:
        """Return once every completion started so far has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Cancel the completions in flight (their PREPARE_* stays durable)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("completing a transaction failed", exc_info=task.exception())

    async def _run(
        self,
        md: TransactionMetadata,
        complete: TxnTransitMetadata,
        partitions: frozenset[TopicPartition],
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        remaining = set(partitions)
        backoff = _FIRST_BACKOFF_S
        while True:
            try:
                await self._write_markers(
                    md, complete, remaining, producer_epoch, coordinator_epoch
                )
                await self._append_complete(md, complete)
                md.complete_transition(complete)
                if complete.txn_state is TxnState.COMPLETE_COMMIT:
                    self.committed += 1
                else:
                    self.aborted += 1
                return
            except Exception:  # an I/O failure or a bug: the id must not stay pending
                log.exception(
                    "completing %s for %r failed; retrying in %.2f s",
                    complete.txn_state.name,
                    md.transactional_id,
                    backoff,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def _write_markers(
        self,
        md: TransactionMetadata,
        complete: TxnTransitMetadata,
        remaining: set[TopicPartition],
        producer_epoch: int,
        coordinator_epoch: int,
    ) -> None:
        """Write markers until `remaining` (updated in place) is empty."""
        commit = complete.txn_state is TxnState.COMPLETE_COMMIT
        marker = TxnMarker(md.producer_id, producer_epoch, coordinator_epoch, commit)
        backoff = _FIRST_BACKOFF_S
        while remaining:
            outcomes = await self.markers.write_markers(marker, remaining)
            for tp, error in outcomes.items():
                if error == ErrorCode.NONE:
                    remaining.discard(tp)
                elif error in MARKER_GIVE_UP:
                    log.error(
                        "marker for %r (producer %d epoch %d) on %s-%d failed with %s; skipped",
                        md.transactional_id,
                        md.producer_id,
                        producer_epoch,
                        tp.topic,
                        tp.partition,
                        error.name,
                    )
                    remaining.discard(tp)
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def _append_complete(self, md: TransactionMetadata, complete: TxnTransitMetadata) -> None:
        backoff = _FIRST_BACKOFF_S
        while True:
            error = await self.state_log.append(md.transactional_id, complete, self.clock())
            if error == ErrorCode.NONE:
                return
            log.warning(
                "retrying %s for %r: %s", complete.txn_state.name, md.transactional_id, error.name
            )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)
