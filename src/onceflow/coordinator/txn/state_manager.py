"""`TransactionStateManager`: the transactional-id cache and how a transition is made durable.

Kafka's `TransactionStateManager`, the state every transaction request shares: the cached
`TransactionMetadata` per transactional id, whether the cache is loaded, the coordinator epoch,
and `append`, the one way a prepared transit reaches `__transaction_state`.

The rule that keeps an id from getting stuck: a transition, once appended, is finished whatever
happens to the request that caused it. Each append runs in a task the manager owns (not in the
request's task, which a shutdown or a future caller may cancel); that task completes the
transition and then runs what must follow it (EndTxn: start the markers; expiration: drop the
id) before the request hears anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from onceflow.coordinator.producer_id import ProducerIdManager, ProducerIdStateError
from onceflow.coordinator.txn import faults
from onceflow.coordinator.txn.completion import TxnCompleter
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.metadata import TransactionMetadata, TxnTransitMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.coordinator.txn.state_log import TransactionStateLog
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode

__all__ = ["AfterDurable", "TransactionStateManager"]

log = logging.getLogger("onceflow.coordinator.txn")

# what runs once a transit is durable and completed, before the request hears anything
AfterDurable = Callable[[TransactionMetadata, TxnTransitMetadata], None]


class TransactionStateManager:
    """The cache of transactional ids and the durable appends of their transitions."""

    def __init__(
        self,
        logs: LogManager,
        producer_ids: ProducerIdManager,
        config: TxnConfig,
        state_log: TransactionStateLog,
        completer: TxnCompleter,
        clock: Callable[[], int],
    ) -> None:
        self.logs = logs
        self.producer_ids = producer_ids
        self.config = config
        self.state_log = state_log
        self.completer = completer
        self.clock = clock
        self.cache: dict[str, TransactionMetadata] = {}
        self.loaded = False
        self.coordinator_epoch = -1
        # InitProducerId calls that gave an existing transactional id a new epoch (or producer
        # id), fencing the instance that held it before (observability: broker.metrics)
        self.fenced_producers = 0
        # TEST-ONLY fault point (faults.py), called right after a PREPARE_COMMIT is durable:
        # None unless a test installed it
        self.after_prepare_commit: Callable[[], None] | None = faults.crash_hook(
            faults.AFTER_PREPARE_COMMIT, config.crash_after_prepare
        )
        self.appends: set[asyncio.Task[ErrorCode]] = set()  # transitions being made durable

    def put(self, md: TransactionMetadata) -> TransactionMetadata:
        """Cache `md` unless its id is known; returns the cached one."""
        return self.cache.setdefault(md.transactional_id, md)

    def check_producer(
        self, transactional_id: str, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, TransactionMetadata | None]:
        """The cached metadata of a request's id when its producer id and epoch are current;
        else the error to answer (and None)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        md = self.cache.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if md.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, md

    def new_producer_id(self) -> int | None:
        """A fresh producer id, or None (logged) when none can be allocated."""
        try:
            return self.producer_ids.generate_producer_id()
        except (OSError, ProducerIdStateError) as exc:
            log.error("cannot allocate a producer id: %s", exc)
            return None

    def start_completion(self, md: TransactionMetadata, transit: TxnTransitMetadata) -> None:
        """After a durable PREPARE_COMMIT/ABORT: start the markers and COMPLETE_* append."""
        if transit.txn_state is TxnState.PREPARE_COMMIT and self.after_prepare_commit:
            self.after_prepare_commit()
        self.completer.start(md, self.coordinator_epoch)

    async def append(
        self,
        md: TransactionMetadata,
        transit: TxnTransitMetadata,
        then: AfterDurable | None = None,
    ) -> ErrorCode:
        """Append a prepared transit; once durable complete it and run `then`, else cancel it.

        The work runs in a task the manager owns, and the caller only awaits it (shielded):
        a caller cancelled mid-append must leave neither the transition pending forever, nor
        the log ahead of memory, nor a durable PREPARE_* without its completion."""
        task = asyncio.ensure_future(self._append_and_complete(md, transit, then))
        self.appends.add(task)
        task.add_done_callback(self._append_done)
        return await asyncio.shield(task)

    def _append_done(self, task: asyncio.Task[ErrorCode]) -> None:
        self.appends.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a __transaction_state append failed", exc_info=task.exception())

    async def _append_and_complete(
        self,
        md: TransactionMetadata,
        transit: TxnTransitMetadata,
        then: AfterDurable | None,
    ) -> ErrorCode:
        try:
            error = await self.state_log.append(md.transactional_id, transit, self.clock())
        except BaseException:
            md.cancel_transition()
            raise
        if error != ErrorCode.NONE:
            md.cancel_transition()
            return error
        md.complete_transition(transit)
        if then is not None:
            then(md, transit)
        return ErrorCode.NONE

    async def wait_for_appends(self) -> None:
        """Wait until every append started so far (or by those) has finished."""
        while self.appends:
            await asyncio.gather(*list(self.appends), return_exceptions=True)
