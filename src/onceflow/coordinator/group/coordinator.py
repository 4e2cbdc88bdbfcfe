"""`GroupCoordinator`: classic consumer groups and their committed offsets on one broker.

The broker's group handlers call one method each and turn the result into the response:
membership (`join`, `sync`, `heartbeat`, `leave`: `membership.py`), offsets
(`commit_offsets`, `txn_offset_commit`, `fetch_offsets`, `delete_offsets`), administration
(`describe_groups`, `list_groups`, `delete_groups`), `ensure_offsets_topic` for
FindCoordinator, and `on_txn_marker`, which the transaction coordinator calls once a COMMIT or
ABORT marker is written to a `__consumer_offsets` partition. Every method returns Kafka error
codes as values.

Offsets live in the group's `__consumer_offsets` partition. A commit appends one batch, waits
for the group-commit flush, and only then updates memory and answers (the one `await` between
check and change; the commit is noted as in flight meanwhile). Transactional offsets
(TxnOffsetCommit) are written in a transactional batch with the producer's id and epoch and
held per producer until the marker; KIP-447 fencing applies when the request carries a
generation or member id. Groups not heard from are expired with their offsets after
`offsets.retention.minutes` (Kafka's rules, `expire_offsets`).

Deviations: after a restart every group comes back EMPTY with its generation and protocol type
(members rejoin; Kafka restores the members). TxnOffsetCommit v5 does not verify that the
transaction includes the group (KIP-890 server-side verification).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace

from onceflow.coordinator.group.config import GroupConfig
from onceflow.coordinator.group.group import CONSUMER_PROTOCOL_TYPE, GroupMetadata
from onceflow.coordinator.group.loader import load_offsets_partition
from onceflow.coordinator.group.member import JoinResult, SyncResult
from onceflow.coordinator.group.membership import GroupMembership, validate_current_member
from onceflow.coordinator.group.offsets import OffsetAndMetadata, TopicPartition
from onceflow.coordinator.group.records import RecordBatchWriter, member_records
from onceflow.coordinator.group.results import (
    CLASSIC_GROUP_TYPE,
    GroupDescription,
    GroupListing,
    MemberDescription,
    OffsetFetchResult,
    PartitionOffset,
    PendingWrite,
)
from onceflow.coordinator.group.state import GroupState
from onceflow.coordinator.group.storage import COMMIT_ERRORS, OffsetsTopic
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.internal import GroupMetadataValue
from onceflow.records.batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

__all__ = [
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
    "OffsetFetchResult",
    "PartitionOffset",
    "PendingWrite",
]

logger = logging.getLogger("onceflow.coordinator.group")


class GroupCoordinator:
    """Every classic group of this broker. Use from one event loop; `load` before serving."""

    def __init__(
        self, config: GroupConfig | None = None, *, clock: Callable[[], int] | None = None
    ) -> None:
        self.config = config or GroupConfig()
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.groups: dict[str, GroupMetadata] = {}
        self.txn_groups: dict[int, set[str]] = {}  # producer id -> groups with pending offsets
        self.storage: OffsetsTopic | None = None
        self.membership = GroupMembership(self)
        self._tasks: set[asyncio.Task] = set()
        self._retention_timer: asyncio.TimerHandle | None = None
        self._loaded = False
        self._closed = False

    # -- shared helpers ------------------------------------------------------------------------

    def now_ms(self) -> int:
        """Wall-clock milliseconds (injectable for tests)."""
        return self._clock()

    def check_group_status(
        self, group_id: str | None, *, allow_empty: bool = False
    ) -> ErrorCode | None:
        """Kafka's `validateGroupStatus`: NOT_COORDINATOR after shutdown,
        COORDINATOR_LOAD_IN_PROGRESS before `load`, INVALID_GROUP_ID for a null id (or an empty
        one, except for the APIs Kafka allows it on: `allow_empty`)."""
        if self._closed:
            return ErrorCode.NOT_COORDINATOR
        if not self._loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        return None

    def add_group(self, group_id: str) -> GroupMetadata:
        """Create an EMPTY group (or return the existing one)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, self.now_ms())
        return group

    def spawn(self, coro: Awaitable) -> asyncio.Task:
        """Run a background completion (a durable write's follow-up) tracked for shutdown."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("group coordinator task failed", exc_info=task.exception())

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition of `group_id`."""
        if self.storage is not None:
            return self.storage.partition_for(group_id)
        return self.config.partition_for(group_id)

    def ensure_offsets_topic(self) -> ErrorCode:
        """FindCoordinator (key type GROUP): create `__consumer_offsets` if needed.
        NONE, or COORDINATOR_NOT_AVAILABLE (also before `load`)."""
        if self.storage is None or self._closed:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.storage.ensure()

    def _append(self, group_id: str, writer: RecordBatchWriter) -> PendingWrite:
        """Append the writer's batch to the group's partition (synchronously)."""
        log = self.storage.log_for(group_id) if self.storage is not None else None
        if log is None:
            return PendingWrite(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        result = self.storage.append(log, writer.build())
        if result.error != ErrorCode.NONE:
            logger.warning("append to %s failed: %s", log.name, result.error.name)
            return PendingWrite(result.error)
        return PendingWrite(ErrorCode.NONE, log, result.base_offset, result.next_offset)

    async def await_write(
        self, write: PendingWrite, errors: Mapping[ErrorCode, ErrorCode]
    ) -> ErrorCode:
        """Wait until `write` is durable; its error mapped through `errors`."""
        error = write.error
        if error == ErrorCode.NONE and write.log is not None and self.storage is not None:
            error = await self.storage.durable(write.log, write.next_offset)
        return errors.get(error, error)

    def write_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> PendingWrite:
        """Append the group's metadata record with `assignment` (Kafka's `storeGroup`)."""
        now = self.now_ms()
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp_ms,
            members=member_records(list(group.members.values()), assignment, group.protocol_name),
        )
        writer = RecordBatchWriter(now)
        writer.add_group(group.group_id, value)
        return self._append(group.group_id, writer)

    # -- lifecycle -----------------------------------------------------------------------------

    def load(self, log_manager: LogManager) -> None:
        """Read every `__consumer_offsets` partition (if the topic exists) and rebuild groups,
        committed offsets and pending transactional offsets; start the retention timer when
        called on a running event loop."""
        self.storage = OffsetsTopic(log_manager, self.config)
        for partition, log in self.storage.partitions():
            load_offsets_partition(self, partition, log)
        self._loaded = True
        logger.info("group coordinator loaded %d group(s)", len(self.groups))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._schedule_retention()

    async def shutdown(self) -> None:
        """Stop timers, answer waiting requests NOT_COORDINATOR, finish background writes.
        Call before `LogManager.shutdown`."""
        self._closed = True
        if self._retention_timer is not None:
            self._retention_timer.cancel()
            self._retention_timer = None
        for group in self.groups.values():
            self.membership.close_group(group, ErrorCode.NOT_COORDINATOR)
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=5)
            for task in pending:
                task.cancel()

    # -- membership (membership.py) ------------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int = -1,
        client_id: str = "",
        client_host: str = "",
        *,
        api_version: int,
    ) -> JoinResult:
        """JoinGroup. `rebalance_timeout_ms` -1 for v0 (the session timeout is used);
        MEMBER_ID_REQUIRED applies from v4, SkipAssignment from v9."""
        return await self.membership.join(
            group_id, member_id, group_instance_id, protocol_type, protocols,
            session_timeout_ms, rebalance_timeout_ms, client_id, client_host,
            require_known_member_id=api_version >= 4,
            support_skipping_assignment=api_version >= 9,
        )  # fmt: skip

    async def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: Mapping[str, bytes] | None = None,
    ) -> SyncResult:
        """SyncGroup; `assignments` (member id -> bytes) only from the leader."""
        return await self.membership.sync(
            group_id, generation_id, member_id, group_instance_id, protocol_type,
            protocol_name, assignments or {},
        )  # fmt: skip

    async def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """Heartbeat."""
        return self.membership.heartbeat(group_id, generation_id, member_id, group_instance_id)

    async def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """LeaveGroup: top-level error and one error per `(member_id, group_instance_id)`."""
        return self.membership.leave(group_id, members)

    # -- offsets -------------------------------------------------------------------------------

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
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        retention_time_ms: int = -1,
        api_version: int = 0,
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit: an error per partition. Generation -1 with an empty member id is a
        simple consumer (allowed while the group is EMPTY; creates the group). An unknown
        group with a generation is ILLEGAL_GENERATION (GROUP_ID_NOT_FOUND from v9)."""
        error = self.check_group_status(group_id, allow_empty=True)
        group = self.groups.get(group_id)
        if error is None and group is None:
            if generation_id < 0:
                group = self.add_group(group_id)
            else:
                error = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if api_version >= 9
                    else ErrorCode.ILLEGAL_GENERATION
                )
        if error is None:
            error = self._validate_offset_commit(
                group, generation_id, member_id, group_instance_id, transactional=False
            )
        if error is None and group.is_(GroupState.COMPLETING_REBALANCE):
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            return dict.fromkeys(offsets, error)
        member = group.members.get(member_id)
        if member is not None:
            self.membership._schedule_heartbeat(group, member)  # a commit counts as a heartbeat
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
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: the offsets become visible when the transaction commits (see
        `on_txn_marker`). From v3 the generation, member id and instance id fence zombies."""
        error = self.check_group_status(group_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.add_group(group_id)
        error = self._validate_offset_commit(
            group, generation_id, member_id, group_instance_id, transactional=True
        )
        if error is not None:
            logger.info("TxnOffsetCommit of %s (producer %d) to group %s rejected: %s",
                        transactional_id, producer_id, group_id, error.name)  # fmt: skip
            return dict.fromkeys(offsets, error)
        return await self._store_offsets(
            group, offsets, producer_id=producer_id, producer_epoch=producer_epoch
        )

    async def _store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        retention_time_ms: int = -1,
    ) -> dict[TopicPartition, ErrorCode]:
        """Write the offsets as one batch, wait until durable, then apply them (Kafka's
        `storeOffsets`)."""
        now = self.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, OffsetAndMetadata] = {}
        expire = now + retention_time_ms if retention_time_ms >= 0 else -1
        for tp, offset in offsets.items():
            if len(offset.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = replace(offset, commit_timestamp=now, expire_timestamp=expire)
        if not accepted:
            return results
        writer = RecordBatchWriter(now, producer_id, producer_epoch)
        deltas = {tp: writer.add_offset(group.group_id, tp, o) for tp, o in accepted.items()}
        write = self._append(group.group_id, writer)
        if write.error != ErrorCode.NONE:
            error = COMMIT_ERRORS.get(write.error, write.error)
            results.update(dict.fromkeys(accepted, error))
            return results
        written = {tp: o.appended_at(write.base_offset + deltas[tp]) for tp, o in accepted.items()}
        transactional = producer_id != NO_PRODUCER_ID
        if transactional:
            for tp, offset in written.items():
                group.offsets.stage_txn(producer_id, tp, offset)
            self.txn_groups.setdefault(producer_id, set()).add(group.group_id)
        else:
            group.offsets.begin_commit(written)
        # finished in a task of ours: a cancelled request must not leave the commit in flight
        finish = self._finish_store(group, write, written, producer_id, results)
        return await asyncio.shield(self.spawn(finish))

    async def _finish_store(
        self,
        group: GroupMetadata,
        write: PendingWrite,
        written: Mapping[TopicPartition, OffsetAndMetadata],
        producer_id: int,
        results: dict[TopicPartition, ErrorCode],
    ) -> dict[TopicPartition, ErrorCode]:
        transactional = producer_id != NO_PRODUCER_ID
        error = await self.await_write(write, COMMIT_ERRORS)
        if transactional:
            if error != ErrorCode.NONE:
                for tp, offset in written.items():
                    group.offsets.unstage_txn(producer_id, tp, offset)
        else:
            group.offsets.end_commit(written)
            if error == ErrorCode.NONE and self.groups.get(group.group_id) is group:
                for tp, offset in written.items():
                    group.offsets.install(tp, offset)
        results.update(dict.fromkeys(written, error))
        return results

    def on_txn_marker(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT (`commit`) or ABORT marker of `producer_id` was written to
        `__consumer_offsets` partition `offsets_partition`: make that producer's pending
        offsets of the partition's groups visible, or drop them."""
        group_ids = self.txn_groups.get(producer_id)
        if not group_ids:
            return
        for group_id in list(group_ids):
            if self.partition_for(group_id) != offsets_partition:
                continue
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                installed = group.offsets.complete_txn(producer_id, commit)
                logger.debug("group %s: %s of producer %d, %d offset(s) installed", group_id,
                             "commit" if commit else "abort", producer_id, installed)  # fmt: skip
        if not group_ids:
            del self.txn_groups[producer_id]

    async def fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None,
        require_stable: bool = False,
    ) -> OffsetFetchResult:
        """OffsetFetch for one group; `partitions` None means every committed one. With
        `require_stable` (v7+), a partition with a pending transactional offset is
        UNSTABLE_OFFSET_COMMIT."""
        error = self.check_group_status(group_id, allow_empty=True)
        if error is not None:
            return OffsetFetchResult(error, {})
        group = self.groups.get(group_id)
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
        error = self.check_group_status(group_id)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
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
                writer = RecordBatchWriter(self.now_ms())
                writer.add_offset_tombstones(group_id, removed)
                error = await self.await_write(self._append(group_id, writer), COMMIT_ERRORS)
            results.update(dict.fromkeys(eligible, error))
        return ErrorCode.NONE, results

    # -- administration ------------------------------------------------------------------------

    async def describe_groups(
        self, group_ids: Sequence[str], *, api_version: int = 0
    ) -> list[GroupDescription]:
        """DescribeGroups. An unknown group is reported DEAD with NONE before v6 and
        GROUP_ID_NOT_FOUND from v6 (KIP-1043), as Kafka does."""
        out = []
        for group_id in group_ids:
            error = self.check_group_status(group_id, allow_empty=True)
            group = self.groups.get(group_id)
            if error is not None:
                out.append(GroupDescription(group_id, error))
            elif group is None or group.is_(GroupState.DEAD):
                missing = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
                out.append(GroupDescription(group_id, missing))
            else:
                out.append(self._describe(group))
        return out

    @staticmethod
    def _describe(group: GroupMetadata) -> GroupDescription:
        stable = group.is_(GroupState.STABLE)
        protocol = group.protocol_name or "" if stable else ""
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )  # fmt: skip
            for m in group.members.values()
        )
        return GroupDescription(
            group.group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
            protocol, members,
        )  # fmt: skip

    async def list_groups(
        self,
        states_filter: Sequence[str] = (),
        types_filter: Sequence[str] = (),
    ) -> tuple[ErrorCode, list[GroupListing]]:
        """ListGroups, filtered by state names (v4+) and group types (v5+; every group here is
        "classic"), both case-insensitive; an empty filter matches everything."""
        if self._closed:
            return ErrorCode.NOT_COORDINATOR, []
        if not self._loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        if types and CLASSIC_GROUP_TYPE not in types:
            return ErrorCode.NONE, []
        listings = [
            GroupListing(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not g.is_(GroupState.DEAD) and (not states or g.state.value.lower() in states)
        ]
        return ErrorCode.NONE, sorted(listings, key=lambda x: x.group_id)

    async def delete_groups(self, group_ids: Sequence[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: EMPTY groups are removed with their offsets (tombstones written);
        GROUP_ID_NOT_FOUND for unknown groups, NON_EMPTY_GROUP for groups with members."""
        results: dict[str, ErrorCode] = {}
        doomed: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self.check_group_status(group_id, allow_empty=True)
            group = self.groups.get(group_id)
            if error is not None:
                results[group_id] = error
            elif group is None or group.is_(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, self.now_ms())
                doomed.append(group)
            else:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
        writes = []
        for group in doomed:
            removed = group.offsets.remove(group.offsets.all_partitions())
            self._drop_group(group)
            writer = RecordBatchWriter(self.now_ms())
            writer.add_offset_tombstones(group.group_id, sorted(removed))
            writer.add_group(group.group_id, None)
            logger.info("group %s deleted with %d offset(s)", group.group_id, len(removed))
            writes.append((group.group_id, self._append(group.group_id, writer)))
        for group_id, write in writes:
            results[group_id] = await self.await_write(write, COMMIT_ERRORS)
        return results

    def _drop_group(self, group: GroupMetadata) -> None:
        """Forget a DEAD group: stop its timers, answer its waiters, remove it."""
        self.membership.close_group(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # -- retention -----------------------------------------------------------------------------

    def _schedule_retention(self) -> None:
        delay = self.config.offsets_retention_check_interval_ms / 1000
        self._retention_timer = asyncio.get_running_loop().call_later(delay, self._retention_tick)

    def _retention_tick(self) -> None:
        self._retention_timer = None
        if self._closed:
            return
        self.spawn(self.expire_offsets())
        self._schedule_retention()

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Remove offsets past `offsets.retention.minutes` (Kafka's `cleanupGroupMetadata`), and
        EMPTY groups left without offsets; returns how many offsets were removed."""
        now = self.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        writes: list[PendingWrite] = []
        total = 0
        for group in list(self.groups.values()):
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
            writer = RecordBatchWriter(now)
            writer.add_offset_tombstones(group.group_id, sorted(expired))
            if dead:
                group.transition_to(GroupState.DEAD, now)
                self._drop_group(group)
                writer.add_group(group.group_id, None)
                logger.info("group %s expired", group.group_id)
            writes.append(self._append(group.group_id, writer))
        for write in writes:
            await self.await_write(write, COMMIT_ERRORS)
        if total:
            logger.info("expired %d offset(s)", total)
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
