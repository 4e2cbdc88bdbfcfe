"""Rebuild groups and offsets from one `__consumer_offsets` partition (Kafka's
`doLoadGroupsAndOffsets`), reading every batch in offset order.

- A plain offset record installs the offset; its tombstone removes the offset and any pending
  transactional offset of that partition.
- An offset record in a transactional batch is held pending for its producer; a COMMIT marker
  of that producer installs the producer's pending offsets of the partition's groups (the later
  record wins against a plain commit), an ABORT drops them. Offsets whose marker is not in the
  log yet stay pending (`LoadedGroups.txn_groups`): the transaction coordinator's recovery
  writes the marker and calls `GroupCoordinator.on_txn_marker`.
- A group record restores the group EMPTY with its generation and protocol type (members are
  not restored: they rejoin). A group tombstone forgets the group's metadata; offsets written
  after it (or surviving it) keep an EMPTY group alive, as in Kafka.

`load_groups` reads the partitions in order into one `LoadedGroups` and returns it; the
coordinator's store takes it in (`GroupStore.load`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from onceflow.coordinator.group.group import GroupMetadata
from onceflow.coordinator.group.records import (
    CorruptOffsetsRecord,
    GroupRecord,
    OffsetRecord,
    parse_record,
)
from onceflow.coordinator.group.storage import read_batches
from onceflow.log.partition import PartitionLog
from onceflow.protocol.internal import GroupMetadataValue
from onceflow.records.batch import BatchHeader
from onceflow.records.control import ControlRecordType, parse_control_record
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import decode_records

__all__ = ["LoadedGroups", "load_groups", "load_offsets_partition"]

logger = logging.getLogger("onceflow.coordinator.group")


@dataclass
class LoadedGroups:
    """What loading found: the groups by id, and per producer id the groups holding its
    pending transactional offsets (their marker is not in the log yet)."""

    groups: dict[str, GroupMetadata] = field(default_factory=dict)
    txn_groups: dict[int, set[str]] = field(default_factory=dict)


class _PartitionLoad:
    """State of loading one partition into `loaded`."""

    def __init__(self, loaded: LoadedGroups, log: PartitionLog, clock: Callable[[], int]) -> None:
        self.loaded = loaded
        self.log = log
        self.clock = clock
        self.now = clock()
        self.touched: set[str] = set()
        self.with_metadata: set[str] = set()
        self.open_txns: dict[int, set[str]] = {}  # producer id -> groups with pending offsets
        self.records = 0

    def group(self, group_id: str) -> GroupMetadata:
        self.touched.add(group_id)
        group = self.loaded.groups.get(group_id)
        if group is None:
            group = self.loaded.groups[group_id] = GroupMetadata(group_id, self.clock())
        return group

    def batch(self, header: BatchHeader, view: memoryview) -> None:
        if header.is_control:
            self.marker(header, view)
            return
        for record in decode_records(view):
            self.records += 1
            offset = header.base_offset + record.offset_delta
            try:
                parsed = parse_record(record.key, record.value, offset)
            except CorruptOffsetsRecord as exc:
                logger.error("%s: skipping record at offset %d: %s", self.log.name, offset, exc)
                continue
            if isinstance(parsed, OffsetRecord):
                if header.is_transactional:
                    self.txn_offset(header.producer_id, parsed)
                else:
                    self.offset(parsed)
            elif isinstance(parsed, GroupRecord):
                self.group_record(parsed)

    def marker(self, header: BatchHeader, view: memoryview) -> None:
        try:
            control = parse_control_record(view)
        except CorruptRecordError as exc:
            logger.error("%s: skipping control batch at %d: %s", self.log.name,
                         header.base_offset, exc)  # fmt: skip
            return
        if control.coordinator_epoch is None:
            return  # not a transaction marker
        commit = control.control_type == ControlRecordType.COMMIT
        for group_id in self.open_txns.pop(header.producer_id, ()):
            group = self.loaded.groups.get(group_id)
            if group is not None:
                group.offsets.complete_txn(header.producer_id, commit)

    def offset(self, record: OffsetRecord) -> None:
        if record.offset is not None:
            self.group(record.group_id).offsets.install(record.tp, record.offset)
            return
        group = self.loaded.groups.get(record.group_id)
        if group is not None:
            group.offsets.remove([record.tp])

    def txn_offset(self, producer_id: int, record: OffsetRecord) -> None:
        if record.offset is not None:
            self.group(record.group_id).offsets.stage_txn(producer_id, record.tp, record.offset)
            self.open_txns.setdefault(producer_id, set()).add(record.group_id)
            return
        group = self.loaded.groups.get(record.group_id)
        if group is None:
            return
        staged = group.offsets.pending_txn.get(producer_id)
        if staged is not None:
            staged.pop(record.tp, None)
            if not staged:
                del group.offsets.pending_txn[producer_id]

    def group_record(self, record: GroupRecord) -> None:
        old = self.loaded.groups.get(record.group_id)
        group = GroupMetadata(record.group_id, self.now)
        if old is not None:
            group.offsets = old.offsets
        self.loaded.groups[record.group_id] = group
        self.touched.add(record.group_id)
        if record.value is None:
            self.with_metadata.discard(record.group_id)
            return
        self.with_metadata.add(record.group_id)
        restore_group(group, record.value, self.now)

    def finish(self) -> None:
        for producer_id, group_ids in self.open_txns.items():
            self.loaded.txn_groups.setdefault(producer_id, set()).update(group_ids)
        for group_id in self.touched:
            group = self.loaded.groups.get(group_id)
            if (
                group is not None
                and group_id not in self.with_metadata
                and not group.offsets.all_partitions()
            ):
                del self.loaded.groups[group_id]


def restore_group(group: GroupMetadata, value: GroupMetadataValue, now_ms: int) -> None:
    """Apply a group record: EMPTY, with the record's generation and protocol type. A group
    that had members becomes empty now (the retention clock starts at load)."""
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    stored = value.current_state_timestamp
    group.state_timestamp_ms = stored if not value.members and stored >= 0 else now_ms


def load_groups(
    partitions: Iterable[tuple[int, PartitionLog]], clock: Callable[[], int]
) -> LoadedGroups:
    """Replay every `(partition, log)` of `__consumer_offsets`, in order; `clock` gives the
    wall-clock milliseconds (a restored group's state timestamp)."""
    loaded = LoadedGroups()
    for _, log in partitions:
        load_offsets_partition(loaded, log, clock)
    return loaded


def load_offsets_partition(
    loaded: LoadedGroups, log: PartitionLog, clock: Callable[[], int]
) -> None:
    """Replay one `__consumer_offsets` partition into `loaded` (on top of the partitions
    read before it)."""
    load = _PartitionLoad(loaded, log, clock)
    for header, view in read_batches(log):
        load.batch(header, view)
    load.finish()
    if load.records:
        logger.info("loaded %d record(s) of %s (%d group(s))", load.records, log.name,
                    len(load.touched))  # fmt: skip
