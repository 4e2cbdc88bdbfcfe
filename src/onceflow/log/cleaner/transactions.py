"""Which transactions a cleaning pass meets, and whether their markers may go (Kafka's
`CleanedTransactionMetadata`).

The pass walks batches in offset order. The aborted transactions of the range come from the
segments' `.txnindex` (`(producer_id, first_offset)`, ordered by first offset): a
transactional batch of a producer with no open transaction in the walk starts one, aborted
when the producer's next aborted entry begins at or before it. Every record of an aborted
transaction is removed. A committed transaction's records are deduplicated like any others;
once one of them is kept, the transaction "has remaining data". A marker (COMMIT or ABORT) ends
its producer's transaction; it may be removed only when the transaction has no remaining data
(then after `delete.retention.ms`, see the cleaner).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class _OpenTxn:
    __slots__ = ("aborted", "has_remaining_data")

    def __init__(self, aborted: bool) -> None:
        self.aborted = aborted
        self.has_remaining_data = False


class CleanedTransactions:
    """Transaction state of one pass over `[start, end)` of a log."""

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        self._aborted: dict[int, deque[int]] = {}
        for producer_id, first_offset in sorted(aborted, key=lambda entry: entry[1]):
            self._aborted.setdefault(producer_id, deque()).append(first_offset)
        self._open: dict[int, _OpenTxn] = {}

    def data_batch(self, producer_id: int, base_offset: int) -> bool:
        """A transactional data batch at `base_offset`: True when its records are aborted."""
        txn = self._open.get(producer_id)
        if txn is None:
            pending = self._aborted.get(producer_id)
            aborted = pending is not None and bool(pending) and pending[0] <= base_offset
            if aborted and pending is not None:
                pending.popleft()
            txn = self._open[producer_id] = _OpenTxn(aborted)
        return txn.aborted

    def kept_data(self, producer_id: int) -> None:
        """A record of the producer's open transaction stays in the log."""
        txn = self._open.get(producer_id)
        if txn is not None:
            txn.has_remaining_data = True

    def marker(self, producer_id: int, base_offset: int) -> bool:
        """A marker ends the producer's transaction: True when the transaction still has data
        in the log (the marker must stay)."""
        txn = self._open.pop(producer_id, None)
        if txn is None:
            # no data batch seen in the pass; an abort entry starting here is consumed
            pending = self._aborted.get(producer_id)
            if pending and pending[0] <= base_offset:
                pending.popleft()
            return False
        return txn.has_remaining_data
