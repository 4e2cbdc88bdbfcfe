"""`GroupCoordinator`: classic consumer groups and their committed offsets on one broker.

The broker's group handlers call one method each and turn the result into the response:
membership (`membership.join`, `.sync`, `.heartbeat`, `.leave`: `membership.py`), offsets
(`commit_offsets`, `txn_offset_commit`, `fetch_offsets`, `delete_offsets`, `expire_offsets`:
`offset_manager.py`), administration (`describe_groups`, `list_groups`, `delete_groups`),
`ensure_offsets_topic` for FindCoordinator, and `on_txn_marker`, which the transaction
coordinator calls once a COMMIT or ABORT marker is written to a `__consumer_offsets` partition.
Every method returns Kafka error codes as values. The groups, their `__consumer_offsets` writes
and background tasks live in one `GroupStore` (`store.py`) that membership and offsets share;
`load` fills it from the log (`loader.py`).

Deviations: after a restart every group comes back EMPTY with its generation and protocol type
(members rejoin; Kafka restores the members). TxnOffsetCommit v5 does not verify that the
transaction includes the group (KIP-890 server-side verification).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from onceflow.coordinator.group.config import GroupConfig
from onceflow.coordinator.group.group import GroupMetadata
from onceflow.coordinator.group.membership import GroupMembership
from onceflow.coordinator.group.offset_manager import OffsetManager
from onceflow.coordinator.group.records import OffsetsBatchWriter
from onceflow.coordinator.group.results import (
    CLASSIC_GROUP_TYPE,
    GroupOverview,
    GroupSummary,
    MemberSummary,
)
from onceflow.coordinator.group.state import GroupState
from onceflow.coordinator.group.storage import COMMIT_ERRORS, OffsetsTopic
from onceflow.coordinator.group.store import GroupStore
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode

__all__ = ["GroupCoordinator"]

log = logging.getLogger("onceflow.coordinator.group")


class GroupCoordinator(OffsetManager):
    """Every classic group of this broker. Use from one event loop; `load` before serving.

    The offset requests (`commit_offsets`, `txn_offset_commit`, `fetch_offsets`,
    `delete_offsets`, `on_txn_marker`, `expire_offsets`) are `OffsetManager`'s."""

    def __init__(
        self, config: GroupConfig | None = None, *, clock: Callable[[], int] | None = None
    ) -> None:
        store = GroupStore(config or GroupConfig(), clock)
        super().__init__(store, GroupMembership(store))
        self._retention_timer: asyncio.TimerHandle | None = None

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        """The groups by id."""
        return self.store.groups

    @property
    def txn_groups(self) -> dict[int, set[str]]:
        """Producer id -> ids of the groups holding its pending transactional offsets."""
        return self.store.txn_groups

    @property
    def storage(self) -> OffsetsTopic | None:
        """`__consumer_offsets` (None before `load`)."""
        return self.store.storage

    def now_ms(self) -> int:
        """Wall-clock milliseconds (injectable for tests)."""
        return self.store.now_ms()

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition of `group_id`."""
        return self.store.partition_for(group_id)

    def ensure_offsets_topic(self) -> ErrorCode:
        """FindCoordinator (key type GROUP): create `__consumer_offsets` if needed.
        NONE, or COORDINATOR_NOT_AVAILABLE (also before `load`)."""
        return self.store.ensure_offsets_topic()

    # -- lifecycle -----------------------------------------------------------------------------

    def load(self, log_manager: LogManager) -> None:
        """Read every `__consumer_offsets` partition (if the topic exists) and rebuild groups,
        committed offsets and pending transactional offsets; start the retention timer when
        called on a running event loop."""
        self.store.load(log_manager)
        log.info("group coordinator loaded %d group(s)", len(self.groups))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._schedule_retention()

    async def shutdown(self) -> None:
        """Stop timers, answer waiting requests NOT_COORDINATOR, finish background writes.
        Call before `LogManager.shutdown`."""
        self.store.closed = True
        if self._retention_timer is not None:
            self._retention_timer.cancel()
            self._retention_timer = None
        for group in self.groups.values():
            self.membership.close_group(group, ErrorCode.NOT_COORDINATOR)
        await self.store.finish_tasks(timeout=5)

    # -- administration ------------------------------------------------------------------------

    async def describe_groups(
        self, group_ids: Sequence[str], *, api_version: int = 0
    ) -> list[GroupSummary]:
        """DescribeGroups. An unknown group is reported DEAD with NONE before v6 and
        GROUP_ID_NOT_FOUND from v6 (KIP-1043), as Kafka does."""
        out = []
        for group_id in group_ids:
            error = self.store.check_group_status(group_id, allow_empty=True)
            group = self.groups.get(group_id)
            if error is not None:
                out.append(GroupSummary(group_id, error))
            elif group is None or group.is_(GroupState.DEAD):
                missing = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
                out.append(GroupSummary(group_id, missing))
            else:
                out.append(self._describe(group))
        return out

    @staticmethod
    def _describe(group: GroupMetadata) -> GroupSummary:
        stable = group.is_(GroupState.STABLE)
        protocol = group.protocol_name or "" if stable else ""
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )  # fmt: skip
            for m in group.members.values()
        )
        return GroupSummary(
            group.group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "",
            protocol, members,
        )  # fmt: skip

    async def list_groups(
        self,
        states_filter: Sequence[str] = (),
        types_filter: Sequence[str] = (),
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """ListGroups, filtered by state names (v4+) and group types (v5+; every group here is
        "classic"), both case-insensitive; an empty filter matches everything."""
        if self.store.closed:
            return ErrorCode.NOT_COORDINATOR, []
        if not self.store.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        if types and CLASSIC_GROUP_TYPE not in types:
            return ErrorCode.NONE, []
        listings = [
            GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
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
            error = self.store.check_group_status(group_id, allow_empty=True)
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
            self.membership.drop_group(group)
            writer = OffsetsBatchWriter(self.now_ms())
            writer.add_offset_tombstones(group.group_id, sorted(removed))
            writer.add_group(group.group_id, None)
            log.info("group %s deleted with %d offset(s)", group.group_id, len(removed))
            writes.append((group.group_id, self.store.append(group.group_id, writer)))
        for group_id, write in writes:
            results[group_id] = await self.store.await_write(write, COMMIT_ERRORS)
        return results

    # -- retention -----------------------------------------------------------------------------

    def _schedule_retention(self) -> None:
        delay = self.config.offsets_retention_check_interval_ms / 1000
        self._retention_timer = asyncio.get_running_loop().call_later(delay, self._retention_tick)

    def _retention_tick(self) -> None:
        self._retention_timer = None
        if self.store.closed:
            return
        self.store.spawn(self.expire_offsets())
        self._schedule_retention()
