"""A group's committed offsets, its in-flight commits and its pending transactional offsets.

Pure bookkeeping, no I/O (Kafka's offset half of `GroupMetadata`). Every committed offset
remembers `record_offset`, the position of its record in `__consumer_offsets`; whenever two
commits of one partition compete, the one written later to the log wins (`install`). That is
Kafka's rule for a transactional commit and a plain commit of the same partition: when the
COMMIT marker arrives, each pending transactional offset replaces the committed one only if its
record sits after the committed one's record.

Transactional offsets (KIP-98) are staged per producer id in `pending_txn` and are invisible to
OffsetFetch until `complete_txn(producer_id, commit=True)` (the marker reached the group's
partition); an ABORT drops them. A plain tombstone of a partition (OffsetDelete, DeleteGroups,
expiry) removes the committed offset and every producer's pending one, as Kafka's coordinator
does when it replays a tombstone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from onceflow.common import TopicPartition

__all__ = [
    "GroupOffsets",
    "CommittedOffset",
]


@dataclass(frozen=True)
class CommittedOffset:
    """A committed (or staged) offset of one partition."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only v1 records (an old client's explicit retention)
    record_offset: int = -1  # position of its record in __consumer_offsets; -1 = not appended

    def appended_at(self, record_offset: int) -> CommittedOffset:
        """A copy that knows where its record was written."""
        return replace(self, record_offset=record_offset)


class GroupOffsets:
    """Offsets of one group: committed, plain commits in flight, transactional ones pending."""

    def __init__(self) -> None:
        self.committed: dict[TopicPartition, CommittedOffset] = {}
        self.in_flight: dict[TopicPartition, int] = {}  # plain commits awaiting their flush
        self.pending_txn: dict[int, dict[TopicPartition, CommittedOffset]] = {}

    def __len__(self) -> int:
        return len(self.committed)

    def get(self, tp: TopicPartition) -> CommittedOffset | None:
        """The committed offset of `tp` (pending transactional offsets are not visible)."""
        return self.committed.get(tp)

    def install(self, tp: TopicPartition, offset: CommittedOffset) -> bool:
        """Make `offset` the committed one unless a record written later is already there."""
        current = self.committed.get(tp)
        if current is not None and current.record_offset > offset.record_offset:
            return False
        self.committed[tp] = offset
        return True

    # -- plain commits -------------------------------------------------------------------------

    def begin_commit(self, tps: Iterable[TopicPartition]) -> None:
        """Note plain commits whose records are being made durable (retention skips them)."""
        for tp in tps:
            self.in_flight[tp] = self.in_flight.get(tp, 0) + 1

    def end_commit(self, tps: Iterable[TopicPartition]) -> None:
        """The plain commits begun for `tps` finished (installed or failed)."""
        for tp in tps:
            left = self.in_flight.get(tp, 0) - 1
            if left > 0:
                self.in_flight[tp] = left
            else:
                self.in_flight.pop(tp, None)

    # -- transactional commits -----------------------------------------------------------------

    def stage_txn(self, producer_id: int, tp: TopicPartition, offset: CommittedOffset) -> None:
        """Hold a transactional offset (with its record offset) until the marker."""
        self.pending_txn.setdefault(producer_id, {})[tp] = offset

    def unstage_txn(self, producer_id: int, tp: TopicPartition, offset: CommittedOffset) -> None:
        """Drop a staged offset whose write failed (only if it is still the staged one)."""
        staged = self.pending_txn.get(producer_id)
        if staged is not None and staged.get(tp) is offset:
            del staged[tp]
            if not staged:
                del self.pending_txn[producer_id]

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """COMMIT: install the producer's staged offsets (log order wins); ABORT: drop them.

        Returns how many offsets were installed.
        """
        staged = self.pending_txn.pop(producer_id, None)
        if not staged or not commit:
            return 0
        installed = 0
        for tp, offset in staged.items():
            if offset.record_offset < 0:
                raise RuntimeError(f"transactional offset of {tp} completed before its write")
            installed += self.install(tp, offset)
        return installed

    def has_pending_txn(self, tp: TopicPartition) -> bool:
        """True when some producer holds an uncommitted transactional offset for `tp`."""
        return any(tp in staged for staged in self.pending_txn.values())

    def has_pending_txn_of(self, producer_id: int) -> bool:
        """True when `producer_id` holds staged offsets in this group."""
        return producer_id in self.pending_txn

    # -- removal and retention -----------------------------------------------------------------

    def all_partitions(self) -> set[TopicPartition]:
        """Every partition with a committed or a pending transactional offset."""
        tps = set(self.committed)
        for staged in self.pending_txn.values():
            tps.update(staged)
        return tps

    def remove(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Forget committed and pending offsets of `tps` (a tombstone); returns those known."""
        removed = []
        for tp in tps:
            known = self.committed.pop(tp, None) is not None
            for producer_id in list(self.pending_txn):
                staged = self.pending_txn[producer_id]
                if staged.pop(tp, None) is not None:
                    known = True
                    if not staged:
                        del self.pending_txn[producer_id]
            if known:
                removed.append(tp)
        return removed

    def expired(
        self,
        now_ms: int,
        retention_ms: int,
        base_timestamp: Callable[[CommittedOffset], int],
        keep_topics: frozenset[str] | set[str] = frozenset(),
    ) -> list[TopicPartition]:
        """Committed offsets past retention (Kafka's `getExpiredOffsets`): not of a topic in
        `keep_topics`, no plain commit in flight, and either past their explicit expiry or
        `retention_ms` after `base_timestamp(offset)`."""
        out = []
        for tp, offset in self.committed.items():
            if tp.topic in keep_topics or tp in self.in_flight:
                continue
            if offset.expire_timestamp >= 0:
                if now_ms >= offset.expire_timestamp:
                    out.append(tp)
            elif now_ms - base_timestamp(offset) >= retention_ms:
                out.append(tp)
        return out
