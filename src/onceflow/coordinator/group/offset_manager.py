"""`OffsetManager`: the committed offsets of every group of one coordinator (the offsets half
of Kafka's group coordinator, its `OffsetMetadataManager`).

OffsetCommit (`commit_offsets`), TxnOffsetCommit (`txn_offset_commit`), OffsetFetch
(`fetch_offsets`), OffsetDelete (`delete_offsets`), the transaction markers landing on
`__consumer_offsets` (`on_txn_marker`) and retention (`expire_offsets`). Every method returns
Kafka error codes as values.

A commit appends one batch, waits for the group-commit flush, and only then updates memory and
answers (the one `await` between check and change; the commit is noted as in flight
meanwhile). Transactional offsets are written in a transactional batch with the producer's id
and epoch and held per producer until the marker; KIP-447 fencing applies when the request
carries a generation or member id. Groups not heard from are expired with their offsets after
`offsets.retention.minutes` (Kafka's rules, `expire_offsets`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from onceflow.common import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TopicPartition
from onceflow.coordinator.group.group import (
    CONSUMER_PROTOCOL_TYPE,
    GroupMetadata,
    validate_current_member,
)
from onceflow.coordinator.group.membership import GroupMembership
from onceflow.coordinator.group.offsets import CommittedOffset
from onceflow.coordinator.group.records import OffsetsBatchWriter
from onceflow.coordinator.group.results import OffsetFetchResult, PartitionOffset, PendingWrite
from onceflow.coordinator.group.state import GroupState
from onceflow.coordinator.group.storage import COMMIT_ERRORS
from onceflow.coordinator.group.store import GroupStore
from onceflow.protocol.errors import ErrorCode

__all__ = ["OffsetManager"]

log = logging.getLogger("onceflow.coordinator.group")


class OffsetManager:
    """Offset requests of every group in `store`; a commit counts as the member's heartbeat
    (`membership`). `GroupCoordinator` derives from it: these are its offset methods."""

    def __init__(self, store: GroupStore, membership: GroupMembership) -> None:
        self.store = store
        self.membership = membership
        self.config = store.config

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        *,
        transactional: bool,
    ) -> ErrorCode | None:
        """Kafka's `validateOffsetCommit` (KIP-447 fencing for transactional commits)."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            error = validate_current_member(group, member_id, group_instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not transactional and not group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID  # only members commit to a group in use
        return None

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Mapping[TopicPartition, CommittedOffset],
        *,
        retention_time_ms: int = -1,
        api_version: int = 0,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: an error per partition. Generation -1 with an empty member id is a
        simple consumer (allowed while the group is EMPTY; creates the group). An unknown
        group with a generation is ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9)."""
        error = self.store.check_group_status(group_id, allow_empty=True)
        group = self.store.groups.get(group_id)
        if error is None and group is None:
            if generation_id < 0:
                group = self.store.add_group(group_id)
            else:
                error = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if api_version >= 9
                    else ErrorCode.ILLEGAL_GENERATION
                )
        if error is not None or group is None:  # no group only with an error
            return dict.fromkeys(
                offsets, error if error is not None else ErrorCode.GROUP_ID_NOT_FOUND
            )
        error = self._validate_offset_commit(
            group, generation_id, member_id, group_instance_id, transactional=False
        )
        if error is None and group.is_(GroupState.COMPLETING_REBALANCE):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if member is not None:
            self.membership.schedule_heartbeat(group, member)  # a commit counts as a heartbeat
        return await self._store_offsets(group, offsets, retention_time_ms=retention_time_ms)

    async def txn_offset_commit(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Mapping[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets become visible when the transaction commits (see
        `on_txn_marker`). From v3 the generation, member id and instance id fence zombies."""
        error = self.store.check_group_status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.store.add_group(group_id)
        error = self._validate_offset_commit(
            group, generation_id, member_id, group_instance_id, transactional=True
        )
        if error is not None:
            log.info("TxnOffsetCommit of %s (producer %d) to group %s rejected: %s",
                        transactional_id, producer_id, group_id, error.name)  # fmt: skip
            return dict.fromkeys(offsets, error)
        return await self._store_offsets(
            group, offsets, producer_id=producer_id, producer_epoch=producer_epoch
        )

    async def _store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, CommittedOffset],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        retention_time_ms: int = -1,
    ) -> dict[TopicPartition, ErrorCode]:
        """Write the offsets as one batch, wait until durable, then apply them (Kafka's
        `storeOffsets`)."""
        now = self.store.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        for tp, offset in offsets.items():
            if len(offset.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = replace(offset, commit_timestamp=now, expire_timestamp=expire)
        if not accepted:
            return results
        writer = OffsetsBatchWriter(now, producer_id, producer_epoch)
        deltas = {tp: writer.add_offset(group.group_id, tp, o) for tp, o in accepted.items()}
        write = self.store.append(group.group_id, writer)
        if write.error != ErrorCode.NONE:
            error = COMMIT_ERRORS.get(write.error, write.error)
            results.update(dict.fromkeys(accepted, error))
            return results
        written = {tp: o.appended_at(write.base_offset + deltas[tp]) for tp, o in accepted.items()}
        transactional = producer_id != NO_PRODUCER_ID
        if transactional:
            for tp, offset in written.items():
                group.offsets.stage_txn(producer_id, tp, offset)
            self.store.txn_groups.setdefault(producer_id, set()).add(group.group_id)
        else:
            group.offsets.begin_commit(written)
        # finished in a task of ours: a cancelled request must not leave the commit in flight
        finish = self._finish_store(group, write, written, producer_id, results)
        return await asyncio.shield(self.store.spawn(finish))

    async def _finish_store(
        self,
        group: GroupMetadata,
        write: PendingWrite,
        written: Mapping[TopicPartition, CommittedOffset],
        producer_id: int,
        results: dict[TopicPartition, ErrorCode],
    ) -> dict[TopicPartition, ErrorCode]:
        transactional = producer_id != NO_PRODUCER_ID
        error = await self.store.await_write(write, COMMIT_ERRORS)
        if transactional:
            if error != ErrorCode.NONE:
                for tp, offset in written.items():
                    group.offsets.unstage_txn(producer_id, tp, offset)
        else:
            group.offsets.end_commit(written)
            if error == ErrorCode.NONE and self.store.groups.get(group.group_id) is group:
                for tp, offset in written.items():
                    group.offsets.install(tp, offset)
        results.update(dict.fromkeys(written, error))
        return results

    def on_txn_marker(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT (`commit`) or ABORT marker of `producer_id` was written to
        `__consumer_offsets` partition `offsets_partition`: make that producer's pending
        offsets of the partition's groups visible, or drop them."""
        group_ids = self.store.txn_groups.get(producer_id)
        if not group_ids:
            return
        for group_id in list(group_ids):
            if self.store.partition_for(group_id) != offsets_partition:
                continue
            group_ids.discard(group_id)
            group = self.store.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                installed = group.offsets.complete_txn(producer_id, commit)
                log.debug("group %s: %s of producer %d, %d offset(s) installed", group_id,
                             "commit" if commit else "abort", producer_id, installed)  # fmt: skip
        if not group_ids:
            del self.store.txn_groups[producer_id]

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        require_stable: bool = False,
    ) -> OffsetFetchResult:
        """OffsetFetch for one group; `partitions` None means every committed one. With
        `require_stable` (v7+), a partition with a pending transactional offset is
        UNSTABLE_OFFSET_COMMIT."""
        error = self.store.check_group_status(group_id, allow_empty=True)
        if error is not None:
            return OffsetFetchResult(error, {})
        group = self.store.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return OffsetFetchResult(
                ErrorCode.NONE, {tp: PartitionOffset() for tp in partitions or ()}
            )
        tps = list(partitions) if partitions is not None else sorted(group.offsets.committed)
        out: dict[TopicPartition, PartitionOffset] = {}
        for tp in tps:
            offset = group.offsets.get(tp)
            if require_stable and group.offsets.has_pending_txn(tp):
                out[tp] = PartitionOffset(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            elif offset is None:
                out[tp] = PartitionOffset()
            else:
                out[tp] = PartitionOffset(offset.offset, offset.leader_epoch, offset.metadata)
        return OffsetFetchResult(ErrorCode.NONE, out)

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: group error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) and per-partition
        errors (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member consumes)."""
        error = self.store.check_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.store.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp.topic):
                    results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            removed = group.offsets.remove(eligible)
            error = ErrorCode.NONE
            if removed:
                writer = OffsetsBatchWriter(self.store.now_ms())
                writer.add_offset_tombstones(group_id, removed)
                write = self.store.append(group_id, writer)
                error = await self.store.await_write(write, COMMIT_ERRORS)
            results.update(dict.fromkeys(eligible, error))
        return ErrorCode.NONE, results

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Remove offsets past `offsets.retention.minutes` (Kafka's `cleanupGroupMetadata`), and
        EMPTY groups left without offsets; returns how many offsets were removed."""
        now = self.store.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        writes: list[PendingWrite] = []
        total = 0
        for group in list(self.store.groups.values()):
            expired = group.offsets.remove(_expired_offsets(group, now, retention))
            total += len(expired)
            dead = (
                group.is_(GroupState.EMPTY)
                and not group.offsets.all_partitions()
                and not group.offsets.in_flight
                and not group.pending_members
            )
            if not expired and not dead:
                continue
            writer = OffsetsBatchWriter(now)
            writer.add_offset_tombstones(group.group_id, sorted(expired))
            if dead:
                group.transition_to(GroupState.DEAD, now)
                self.membership.drop_group(group)
                writer.add_group(group.group_id, None)
                log.info("group %s expired", group.group_id)
            writes.append(self.store.append(group.group_id, writer))
        for write in writes:
            await self.store.await_write(write, COMMIT_ERRORS)
        if total:
            log.info("expired %d offset(s)", total)
        return total


def _expired_offsets(group: GroupMetadata, now: int, retention_ms: int) -> list[TopicPartition]:
    """Kafka's `removeExpiredOffsets` selection: an EMPTY group's offsets count from the time
    it became empty; a STABLE consumer group's offsets of topics no member subscribes to count
    from their commit; a group without a protocol type (simple consumers) likewise."""
    offsets = group.offsets
    if group.protocol_type and group.is_(GroupState.EMPTY):
        since = group.state_timestamp_ms
        return offsets.expired(
            now, retention_ms, lambda o: since if since >= 0 else o.commit_timestamp
        )
    if (
        group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.subscribed_topics is not None
        and group.is_(GroupState.STABLE)
    ):
        return offsets.expired(
            now, retention_ms, lambda o: o.commit_timestamp, group.subscribed_topics
        )
    if not group.protocol_type:
        return offsets.expired(now, retention_ms, lambda o: o.commit_timestamp)
    return []
