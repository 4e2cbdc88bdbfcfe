"""`GroupStore`: the groups of one coordinator and the `__consumer_offsets` writes that keep them.

What membership (`membership.py`), offsets (`offset_manager.py`) and the coordinator facade
(`coordinator.py`) share, so none of them reaches into another:

- the groups by id (`groups`) and, per producer id, the groups holding its pending
  transactional offsets (`txn_groups`);
- the lifecycle (`loaded`, `closed`) behind `check_group_status`;
- `load`, which fills the maps from what `loader.load_groups` read back;
- writes: `append` one batch to a group's partition, `write_group` (the group metadata record),
  `await_write` until the group-commit flush covers it;
- `spawn`: background completions of durable writes, tracked for shutdown;
- the wall clock (`now_ms`, injectable for tests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from onceflow.common import wall_clock_ms
from onceflow.coordinator.group.config import GroupConfig
from onceflow.coordinator.group.group import GroupMetadata
from onceflow.coordinator.group.loader import load_groups
from onceflow.coordinator.group.records import OffsetsBatchWriter, member_records
from onceflow.coordinator.group.results import PendingWrite
from onceflow.coordinator.group.storage import OffsetsTopic
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.internal import GroupMetadataValue

__all__ = ["GroupStore"]

_T = TypeVar("_T")

logger = logging.getLogger("onceflow.coordinator.group")


class GroupStore:
    """Groups, their `__consumer_offsets` partitions and background writes. One event loop."""

    def __init__(self, config: GroupConfig, clock: Callable[[], int] | None = None) -> None:
        self.config = config
        self._clock = clock or wall_clock_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.txn_groups: dict[int, set[str]] = {}  # producer id -> groups with pending offsets
        self.storage: OffsetsTopic | None = None
        self.loaded = False
        self.closed = False
        self._tasks: set[asyncio.Task[Any]] = set()  # of any result type

    def now_ms(self) -> int:
        """Wall-clock milliseconds (injectable for tests)."""
        return self._clock()

    # -- lifecycle -----------------------------------------------------------------------------

    def load(self, log_manager: LogManager) -> None:
        """Read every `__consumer_offsets` partition (if the topic exists) and take in the
        groups, committed offsets and pending transactional offsets found."""
        self.storage = OffsetsTopic(log_manager, self.config)
        loaded = load_groups(self.storage.partitions(), self.now_ms)
        self.groups.update(loaded.groups)
        for producer_id, group_ids in loaded.txn_groups.items():
            self.txn_groups.setdefault(producer_id, set()).update(group_ids)
        self.loaded = True

    async def finish_tasks(self, timeout: float | None = None) -> None:
        """Wait for the background tasks; those still running after `timeout` seconds (if
        given) are cancelled."""
        if self._tasks:
            _, pending = await asyncio.wait(list(self._tasks), timeout=timeout)
            for task in pending:
                task.cancel()

    def check_group_status(
        self, group_id: str | None, *, allow_empty: bool = False
    ) -> ErrorCode | None:
        """Kafka's `validateGroupStatus`: NOT_COORDINATOR after shutdown,
        COORDINATOR_LOAD_IN_PROGRESS before `load`, INVALID_GROUP_ID for a null id (or an empty
        one, except for the APIs Kafka allows it on: `allow_empty`)."""
        if self.closed:
            return ErrorCode.NOT_COORDINATOR
        if not self.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.INVALID_GROUP_ID
        return None

    # -- groups --------------------------------------------------------------------------------

    def add_group(self, group_id: str) -> GroupMetadata:
        """Create an EMPTY group (or return the existing one)."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, self.now_ms())
        return group

    def forget_group(self, group: GroupMetadata) -> None:
        """Remove `group` (if it is still the group of its id)."""
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition of `group_id`."""
        if self.storage is not None:
            return self.storage.partition_for(group_id)
        return self.config.partition_for(group_id)

    def ensure_offsets_topic(self) -> ErrorCode:
        """Create `__consumer_offsets` if needed: NONE, or COORDINATOR_NOT_AVAILABLE (also
        before `load` and after shutdown)."""
        if self.storage is None or self.closed:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return self.storage.ensure()

    # -- writes --------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, _T]) -> asyncio.Task[_T]:
        """Run a background completion (a durable write's follow-up) tracked for shutdown."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("group coordinator task failed", exc_info=task.exception())

    def append(self, group_id: str, writer: OffsetsBatchWriter) -> PendingWrite:
        """Append the writer's batch to the group's partition (synchronously)."""
        storage = self.storage
        log = storage.log_for(group_id) if storage is not None else None
        if storage is None or log is None:
            return PendingWrite(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        result = storage.append(log, writer.build())
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
        writer = OffsetsBatchWriter(now)
        writer.add_group(group.group_id, value)
        return self.append(group.group_id, writer)
