"""Rebuild groups and offsets from one `__consumer_offsets` partition (Kafka's
`doLoadGroupsAndOffsets`), reading every batch in offset order.

- A plain offset record installs the offset; its tombstone removes the offset and any pending
  transactional offset of that partition.
- An offset record in a transactional batch is held pending for its producer; a COMMIT marker
  of that producer installs the producer's pending offsets of the partition's groups (the later
  record wins against a plain commit), an ABORT drops them. Offsets whose marker is not in the
  log yet stay pending: the transaction coordinator's recovery writes the marker and calls
  `GroupCoordinator.on_txn_marker`.
- A group record restores the group EMPTY with its generation and protocol type (members are
  not restored: they rejoin). A group tombstone forgets the group's metadata; offsets written
  after it (or surviving it) keep an EMPTY group alive, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from onceflow.coordinator.group.coordinator import GroupCoordinator

__all__ = ["load_offsets_partition"]

logger = logging.getLogger("onceflow.coordinator.group")


class _PartitionLoad:
    """State of loading one partition."""

    def __init__(self, coordinator: GroupCoordinator, log: PartitionLog) -> None:
        self.coordinator = coordinator
        self.log = log
        self.now = coordinator.now_ms()
        self.touched: set[str] = set()
        self.with_metadata: set[str] = set()
        self.open_txns: dict[int, set[str]] = {}  # producer id -> groups with pending offsets
        self.records = 0

    def group(self, group_id: str) -> GroupMetadata:
        self.touched.add(group_id)
        return self.coordinator.add_group(group_id)

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
            group = self.coordinator.groups.get(group_id)
            if group is not None:
                group.offsets.complete_txn(header.producer_id, commit)

    def offset(self, record: OffsetRecord) -> None:
        if record.offset is not None:
            self.group(record.group_id).offsets.install(record.tp, record.offset)
            return
        group = self.coordinator.groups.get(record.group_id)
        if group is not None:
            group.offsets.remove([record.tp])

    def txn_offset(self, producer_id: int, record: OffsetRecord) -> None:
        if record.offset is not None:
            self.group(record.group_id).offsets.stage_txn(producer_id, record.tp, record.offset)
            self.open_txns.setdefault(producer_id, set()).add(record.group_id)
            return
        group = self.coordinator.groups.get(record.group_id)
        staged = group.offsets.pending_txn.get(producer_id) if group is not None else None
        if staged is not None:
            staged.pop(record.tp, None)
            if not staged:
                del group.offsets.pending_txn[producer_id]

    def group_record(self, record: GroupRecord) -> None:
        old = self.coordinator.groups.get(record.group_id)
        group = GroupMetadata(record.group_id, self.now)
        if old is not None:
            group.offsets = old.offsets
        self.coordinator.groups[record.group_id] = group
        self.touched.add(record.group_id)
        if record.value is None:
            self.with_metadata.discard(record.group_id)
            return
        self.with_metadata.add(record.group_id)
        restore_group(group, record.value, self.now)

    def finish(self) -> None:
        for producer_id, group_ids in self.open_txns.items():
            self.coordinator.txn_groups.setdefault(producer_id, set()).update(group_ids)
        for group_id in self.touched:
            group = self.coordinator.groups.get(group_id)
            if (
                group is not None
                and group_id not in self.with_metadata
                and not group.offsets.all_partitions()
            ):
                del self.coordinator.groups[group_id]


def restore_group(group: GroupMetadata, value: GroupMetadataValue, now_ms: int) -> None:
    """Apply a group record: EMPTY, with the record's generation and protocol type. A group
    that had members becomes empty now (the retention clock starts at load)."""
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    stored = value.current_state_timestamp
    group.state_timestamp_ms = stored if not value.members and stored >= 0 else now_ms


def load_offsets_partition(
    coordinator: GroupCoordinator, partition: int, log: PartitionLog
) -> None:
    """Replay `__consumer_offsets` partition `partition` into `coordinator`."""
    load = _PartitionLoad(coordinator, log)
    for header, view in read_batches(log):
        load.batch(header, view)
    load.finish()
    if load.records:
        logger.info("loaded %d record(s) of %s (%d group(s))", load.records, log.name,
                    len(load.touched))  # fmt: skip
