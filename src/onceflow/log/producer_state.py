"""Producer state of one partition: the idempotent-producer window and open transactions.

Pure state, no I/O (snapshots are `log.producer_snapshot`). Staged as Kafka's
`ProducerStateManager`: `prepare_update(producer_id, origin)` returns a `ProducerAppendInfo`
holding a *copy* of the producer's entry; the log feeds it every batch of the record set
(`append_data_batch`, `append_end_txn_marker`), writes the record set, and only then calls
`update(append_info)`. A rejected batch or a failed write leaves the manager untouched.

Rules for a data batch (Kafka's `ProducerAppendInfo`, 3.x):

| producer state                  | batch                              | outcome                |
| ------------------------------- | ---------------------------------- | ---------------------- |
| any                             | epoch < current epoch              | INVALID_PRODUCER_EPOCH |
| unknown (no entry / no epoch)   | any sequence                       | accepted (KIP-360)     |
| epoch E                         | epoch > E, sequence 0              | accepted, window reset |
| epoch E                         | epoch > E, sequence != 0           | OUT_OF_ORDER_SEQUENCE  |
| epoch E, last sequence L        | epoch E, first == L + 1 (or 0 after| accepted               |
|                                 | L == 2**31-1)                      |                        |
| epoch E, batch in the window    | epoch E, same first and last seq   | duplicate (see below)  |
| epoch E                         | anything else: a gap, an overlap,  | OUT_OF_ORDER_SEQUENCE  |
|                                 | a retry older than the window      |                        |
| open transaction                | non-transactional batch            | INVALID_TXN_STATE      |

OUT_OF_ORDER_SEQUENCE is OUT_OF_ORDER_SEQUENCE_NUMBER. Duplicates are found by
`ProducerStateManager.find_duplicate` (CLIENT origin, before staging): the caller answers the
original offsets and appends nothing.

- Since KIP-360 (Kafka 2.5) the broker no longer answers UNKNOWN_PRODUCER_ID: "if there is no
  current producer epoch (possibly because all producer records have been deleted due to
  retention or the DeleteRecords API) accept writes with any sequence number". We follow that.
  Within one record set, a batch is checked against the staged state, so once the first batch
  of an unknown producer is staged the next one must follow it (Kafka checks the committed
  state there and would accept any sequence again; clients send one batch per partition).
- A retry of a batch that fell out of the 5-batch window is OUT_OF_ORDER_SEQUENCE_NUMBER, as in
  Kafka >= 1.0 (DUPLICATE_SEQUENCE_NUMBER is no longer sent by brokers).
- Sequence checks apply to origin CLIENT only; COORDINATOR writes (transaction markers, the
  group coordinator's transactional offset commits) check the epoch only; REPLICATION (log
  recovery replay) checks nothing, as Kafka's recovery does.

Markers (control batches, COORDINATOR origin): epoch < current -> INVALID_PRODUCER_EPOCH; a
coordinator epoch below the recorded one -> TRANSACTION_COORDINATOR_FENCED. A marker ends the
producer's open transaction and yields a `CompletedTxn`; a higher epoch clears the window.

Memory per producer: one entry object plus at most 5 `BatchMetadata` tuples (5 ints each), about
1 KB in CPython. Entries idle longer than `producer.id.expiration.ms` are removed by
`remove_expired`, except while their transaction is open.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from enum import IntEnum
from typing import NamedTuple

from onceflow.common import NO_PRODUCER_EPOCH
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "AppendOrigin",
    "BatchMetadata",
    "CompletedTxn",
    "DuplicateBatch",
    "ProducerAppendInfo",
    "ProducerInfo",
    "ProducerStateEntry",
    "ProducerStateManager",
    "in_sequence",
]

NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_SEQUENCE = -1
NO_COORDINATOR_EPOCH = -1
MAX_SEQUENCE = 2**31 - 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms


class AppendOrigin(IntEnum):
    """Who appends (Kafka's `AppendOrigin`): decides which checks apply."""

    CLIENT = 0  # a Produce request: epoch, sequence, duplicate and transaction checks
    COORDINATOR = 1  # markers and coordinator writes: epoch (and coordinator epoch) checks
    REPLICATION = 2  # replay of the log on load: no checks


class BatchMetadata(NamedTuple):
    """What the window keeps of one appended batch."""

    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        """Offset of the batch's first record."""
        return self.last_offset - self.offset_delta


class DuplicateBatch(NamedTuple):
    """A retried batch already in the log: answer these offsets, append nothing."""

    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at `last_offset` (Kafka's `CompletedTxn`)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerInfo(NamedTuple):
    """One row of `active_producers` (what DescribeProducers answers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when no transaction is open


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """True when `next_seq` directly follows `last_seq` (wrapping from 2**31-1 to 0)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class ProducerStateEntry:
    """State of one producer id on one partition."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = NO_COORDINATOR_EPOCH,
        last_timestamp: int = -1,
        current_txn_first_offset: int | None = None,
        batches: Iterable[BatchMetadata] = (),
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: deque[BatchMetadata] = deque(batches, NUM_BATCHES_TO_RETAIN)

    @property
    def first_seq(self) -> int:
        """First sequence of the oldest retained batch, -1 if none."""
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        """Last sequence of the newest retained batch, -1 if none."""
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        """Last offset of the newest retained batch, -1 if none."""
        return self.batches[-1].last_offset if self.batches else -1

    def copy(self) -> ProducerStateEntry:
        """An independent copy (the staged entry of a `ProducerAppendInfo`)."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            self.batches,
        )

    def maybe_update_epoch(self, producer_epoch: int) -> None:
        """Adopt a new epoch; the window belongs to the old one and is cleared."""
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()

    def add_batch(
        self,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        last_offset: int,
        offset_delta: int,
        timestamp: int,
    ) -> None:
        """Record an appended batch (the deque drops the oldest beyond 5)."""
        self.maybe_update_epoch(producer_epoch)
        self.batches.append(
            BatchMetadata(first_seq, last_seq, last_offset, offset_delta, timestamp)
        )
        self.last_timestamp = timestamp

    def find_duplicate(
        self, producer_epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        """The retained batch with exactly these sequences under this epoch, or None."""
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProducerStateEntry):
            return NotImplemented
        return self._key() == other._key()

    def _key(self) -> tuple[object, ...]:
        return (
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            tuple(self.batches),
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(pid={self.producer_id}, epoch={self.producer_epoch}, "
            f"coord_epoch={self.coordinator_epoch}, txn={self.current_txn_first_offset}, "
            f"batches={list(self.batches)})"
        )


class ProducerAppendInfo:
    """Validates one producer's batches of a record set against a staged copy of its entry."""

    def __init__(
        self, producer_id: int, current: ProducerStateEntry | None, origin: AppendOrigin
    ) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self.current = current
        self.updated = current.copy() if current is not None else ProducerStateEntry(producer_id)
        self.completed_txns: list[CompletedTxn] = []

    def append_data_batch(
        self,
        producer_epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        is_transactional: bool,
    ) -> ErrorCode:
        """Check and stage a data batch; NONE, or the error (the staged copy is then unusable)."""
        entry = self.updated
        if self.origin != AppendOrigin.REPLICATION:
            if producer_epoch < entry.producer_epoch:
                return ErrorCode.INVALID_PRODUCER_EPOCH
            if self.origin == AppendOrigin.CLIENT:
                error = self._check_sequence(producer_epoch, first_seq)
                if error != ErrorCode.NONE:
                    return error
            if entry.current_txn_first_offset is not None and not is_transactional:
                return ErrorCode.INVALID_TXN_STATE
        entry.add_batch(
            producer_epoch, first_seq, last_seq, last_offset, last_offset - first_offset, timestamp
        )
        if is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
        return ErrorCode.NONE

    def _check_sequence(self, producer_epoch: int, first_seq: int) -> ErrorCode:
        entry = self.updated
        if entry.producer_epoch == NO_PRODUCER_EPOCH:
            return ErrorCode.NONE  # no state for this producer (KIP-360): any sequence
        if producer_epoch != entry.producer_epoch:
            return ErrorCode.NONE if first_seq == 0 else ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        if in_sequence(entry.last_seq, first_seq):
            return ErrorCode.NONE
        return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    def append_end_txn_marker(
        self,
        producer_epoch: int,
        is_abort: bool,
        coordinator_epoch: int,
        offset: int,
        timestamp: int,
    ) -> ErrorCode:
        """Check and stage a COMMIT/ABORT marker at `offset`; an open transaction completes
        (appended to `completed_txns`)."""
        entry = self.updated
        if self.origin == AppendOrigin.CLIENT:
            return ErrorCode.INVALID_RECORD  # LogValidator rejects client control batches first
        if self.origin == AppendOrigin.COORDINATOR:
            if producer_epoch < entry.producer_epoch:
                return ErrorCode.INVALID_PRODUCER_EPOCH
            if entry.coordinator_epoch > coordinator_epoch:
                return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        if entry.current_txn_first_offset is not None:
            self.completed_txns.append(
                CompletedTxn(self.producer_id, entry.current_txn_first_offset, offset, is_abort)
            )
        entry.maybe_update_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = None
        entry.last_timestamp = timestamp
        return ErrorCode.NONE


class ProducerStateManager:
    """Every producer's entry on one partition, the open transactions, and the map end offset."""

    def __init__(self, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        self.map_end_offset = 0  # the state covers every batch below this offset

    def __len__(self) -> int:
        return len(self.producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The committed entry of a producer, None if unknown."""
        return self.producers.get(producer_id)

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        """Start staging batches of `producer_id` (nothing changes until `update`)."""
        return ProducerAppendInfo(producer_id, self.producers.get(producer_id), origin)

    def find_duplicate(
        self, producer_id: int, producer_epoch: int, first_seq: int, last_seq: int
    ) -> DuplicateBatch | None:
        """A client retry of a batch still in the producer's window, or None."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None
        batch = entry.find_duplicate(producer_epoch, first_seq, last_seq)
        if batch is None:
            return None
        return DuplicateBatch(batch.first_offset, batch.last_offset, batch.timestamp)

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Commit a staged entry (call only after its batches were written)."""
        entry = append_info.updated
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is None:
            self._ongoing.pop(entry.producer_id, None)
        else:
            self._ongoing[entry.producer_id] = entry.current_txn_first_offset

    def load_entry(self, entry: ProducerStateEntry) -> None:
        """Install an entry read from a snapshot."""
        self.update(ProducerAppendInfo(entry.producer_id, entry, AppendOrigin.REPLICATION))

    def clear(self) -> None:
        """Forget every producer (before a reload)."""
        self.producers.clear()
        self._ongoing.clear()
        self.map_end_offset = 0

    @property
    def first_unstable_offset(self) -> int | None:
        """Smallest first offset of an open transaction, None when none is open."""
        return min(self._ongoing.values()) if self._ongoing else None

    def has_ongoing_txns(self) -> bool:
        """True while any transaction on this partition is open."""
        return bool(self._ongoing)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """LSO once `completed` ended: the first offset of the earliest other open transaction,
        else the offset after the marker (the `.txnindex` entry's last stable offset)."""
        others = [off for pid, off in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def remove_expired(self, now_ms: int) -> int:
        """Drop producers idle for `producer.id.expiration.ms` without an open transaction."""
        limit = self.producer_id_expiration_ms
        expired = [
            pid
            for pid, entry in self.producers.items()
            if entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= limit
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        """True when `remove_expired(now_ms)` would drop `entry`."""
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def active_producers(self) -> list[ProducerInfo]:
        """Every live producer, by id (for DescribeProducers)."""
        return [
            ProducerInfo(
                entry.producer_id,
                entry.producer_epoch,
                entry.last_seq,
                entry.last_timestamp,
                entry.coordinator_epoch,
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
            )
            for _, entry in sorted(self.producers.items())
        ]
