"""`Rebalancer`: the rebalance of a classic group and the timers that drive it.

What JoinGroup (join.py), SyncGroup (sync.py), Heartbeat and LeaveGroup (heartbeat_leave.py)
share: preparing a rebalance (PREPARING_REBALANCE, with `group.initial.rebalance.delay.ms` for
an EMPTY group), completing the join phase (Kafka's `onCompleteJoin`: members that did not
rejoin are dropped, the next generation starts, every waiting member is answered), the
pending-sync, join and session (heartbeat) timers, and removing a member. The requests change
state only through it; it holds no state of its own beyond the `GroupStore`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onceflow.coordinator.group.group import GroupMetadata
from onceflow.coordinator.group.member import JoinResult, MemberMetadata, SyncResult
from onceflow.coordinator.group.state import GroupState
from onceflow.coordinator.group.storage import STORE_GROUP_ERRORS
from onceflow.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from onceflow.coordinator.group.results import PendingWrite
    from onceflow.coordinator.group.store import GroupStore

__all__ = ["Rebalancer"]

log = logging.getLogger("onceflow.coordinator.group")


class Rebalancer:
    """Rebalances, timers and member removal for every group of one coordinator's store."""

    def __init__(self, store: GroupStore) -> None:
        self.store = store
        self.config = store.config

    @staticmethod
    def later(delay_ms: int, callback: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        """Call `callback(*args)` on the running loop after `delay_ms` (now if negative)."""
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback, *args)

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Start a rebalance if the group's state allows one (STABLE, COMPLETING_REBALANCE)."""
        if group.can_rebalance:
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        """Kafka's `prepareRebalance`: PREPARING_REBALANCE and the join timer (the initial delay
        for an EMPTY group); waiting SyncGroups get REBALANCE_IN_PROGRESS."""
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._cancel_sync_timer(group)
        self._cancel_join_timer(group)
        initial = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.store.now_ms())
        log.info("preparing to rebalance group %s (generation %d): %s",
                    group.group_id, group.generation_id, reason)  # fmt: skip
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            group.join_is_initial = False
            group.join_timer = self.later(group.rebalance_timeout_ms, self._on_join_timeout, group)
            self.try_complete_join(group)

    def _schedule_initial_join(
        self, group: GroupMetadata, delay_ms: int, remaining_ms: int
    ) -> None:
        group.join_is_initial = True
        group.join_timer = self.later(delay_ms, self._on_initial_join_timer, group, remaining_ms)

    def _on_initial_join_timer(self, group: GroupMetadata, remaining_ms: int) -> None:
        group.join_timer = None
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_join(group, delay, max(remaining_ms - delay, 0))
            return
        group.join_is_initial = False
        self.complete_join(group)

    def _on_join_timeout(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.complete_join(group)

    def try_complete_join(self, group: GroupMetadata) -> None:
        """Finish the rebalance now if every member rejoined (never during the initial delay)."""
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and not group.join_is_initial
            and group.has_all_members_joined()
        ):
            self.complete_join(group)

    def complete_join(self, group: GroupMetadata) -> None:
        """Kafka's `onCompleteJoin`."""
        self._cancel_join_timer(group)
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: removing member %s, it did not rejoin",
                            group.group_id, member.member_id)  # fmt: skip
                group.remove(member.member_id)
                member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # only static members that did not rejoin are left: wait for them or their timeout
            group.join_timer = self.later(group.rebalance_timeout_ms, self._on_join_timeout, group)
            return
        now = self.store.now_ms()
        group.init_next_generation(now)
        if group.is_(GroupState.EMPTY):
            log.info("group %s with generation %d is now empty",
                        group.group_id, group.generation_id)  # fmt: skip
            write = self.store.write_group(group, {})
            self.store.spawn(self._finish_empty_store(group, write))
            return
        log.info("stabilized group %s generation %d (protocol %s, %d members)",
                    group.group_id, group.generation_id, group.protocol_name,
                    len(group.members))  # fmt: skip
        for member in list(group.members.values()):
            leader = group.is_leader(member.member_id)
            member.complete_join(group.join_result_for(member.member_id, with_members=leader))
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self._schedule_pending_sync(group)

    async def _finish_empty_store(self, group: GroupMetadata, write: PendingWrite) -> None:
        error = await self.store.await_write(write, STORE_GROUP_ERRORS)
        if error != ErrorCode.NONE:
            # no member depends on it: the previous generation comes back after a crash
            log.warning("group %s: writing empty group metadata failed: %s",
                           group.group_id, error.name)  # fmt: skip

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        """Clear every assignment and answer the waiting SyncGroups with `error`."""
        for member in group.members.values():
            member.assignment = b""
            if member.complete_sync(SyncResult(error)):
                self.schedule_heartbeat(group, member)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._cancel_sync_timer(group)
        group.sync_timer = self.later(
            group.rebalance_timeout_ms, self._on_pending_sync_expired, group, group.generation_id
        )

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        """`member_id` synced: stop the pending-sync timer once no member is missing."""
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel_sync_timer(group)

    def _on_pending_sync_expired(self, group: GroupMetadata, generation_id: int) -> None:
        group.sync_timer = None
        if generation_id != group.generation_id or not group.pending_sync:
            return
        if group.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            member = group.remove(member_id)
            if member is not None:
                member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self.prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        """Remove `member` (its waiting requests get UNKNOWN_MEMBER_ID) and rebalance."""
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, f"{reason}: {member.member_id}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        """Restart the member's session timer (`timeout_ms` instead of its session timeout)."""
        member.cancel_heartbeat()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self.later(timeout, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_(GroupState.DEAD) or group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            self.schedule_heartbeat(group, member)  # waiting in a rebalance counts as alive
            return
        log.info("group %s: member %s session timed out", group.group_id, member.member_id)
        self.remove_member_and_update_group(group, member, "session timeout")

    def on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        """A MEMBER_ID_REQUIRED member did not rejoin within its session timeout."""
        group.pending_members.pop(member_id, None)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    @staticmethod
    def _cancel_join_timer(group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.join_is_initial = False

    @staticmethod
    def _cancel_sync_timer(group: GroupMetadata) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def close_group(self, group: GroupMetadata, error: ErrorCode) -> None:
        """Stop every timer of the group and answer its waiting requests with `error`."""
        self._cancel_join_timer(group)
        self._cancel_sync_timer(group)
        for member_id in list(group.pending_members):
            group.remove_pending_member(member_id)
        for member in group.members.values():
            member.cancel_heartbeat()
            member.complete_join(JoinResult(error, member_id=member.member_id))
            member.complete_sync(SyncResult(error))

    def drop_group(self, group: GroupMetadata) -> None:
        """Forget a DEAD group: stop its timers, answer its waiters, remove it from the store."""
        self.close_group(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.store.forget_group(group)
