"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and their timers.

Follows Kafka's `GroupCoordinator` (the classic-group half, 3.x, with the generation checks of
the 4.x classic path). Every request does its state changes synchronously, then may wait on the
member's join or sync future, which the rebalance completes.

- JoinGroup: a new dynamic member on v4+ first gets MEMBER_ID_REQUIRED with its member id
  (KIP-394) and counts as pending until it rejoins or its session timeout passes. Joining
  starts a rebalance (PREPARING_REBALANCE) when the state allows; an EMPTY group waits
  `group.initial.rebalance.delay.ms`, extended while new members keep arriving, up to the
  rebalance timeout; otherwise the rebalance completes as soon as every member rejoined, or at
  the longest rebalance timeout, when dynamic members that did not rejoin are dropped. The
  generation then increases, the protocol is chosen by vote, and every waiting member is
  answered (the leader with the members' metadata). A static member (group.instance.id,
  KIP-345) rejoining with an unknown member id replaces its old member id; in STABLE, when the
  protocol chosen for the next generation would not change, the group record is rewritten and
  no rebalance happens (the old id is fenced: FENCED_INSTANCE_ID).
- SyncGroup: the leader's assignment is written to `__consumer_offsets`; once durable, the
  group is STABLE and every waiting member gets its part. Members that do not sync within the
  rebalance timeout are removed and the group rebalances.
- Heartbeat: restarts the session timer; REBALANCE_IN_PROGRESS while preparing a rebalance.
- Session timeouts remove members (not while they wait in a rebalance, except new members,
  which get `NewMemberJoinTimeoutMs`).

Deviations: a removed member's pending SyncGroup is answered UNKNOWN_MEMBER_ID (Kafka leaves
it to time out); on rejoin a member's session and rebalance timeouts are updated (as Kafka's
4.x classic path does).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from onceflow.coordinator.group.group import GroupMetadata
from onceflow.coordinator.group.member import JoinResult, MemberMetadata, SyncResult
from onceflow.coordinator.group.state import GroupState
from onceflow.coordinator.group.storage import STORE_GROUP_ERRORS
from onceflow.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from onceflow.coordinator.group.results import PendingWrite
    from onceflow.coordinator.group.store import GroupStore

__all__ = ["GroupMembership", "validate_current_member"]

log = logging.getLogger("onceflow.coordinator.group")

Protocols = Sequence[tuple[str, bytes]]


def validate_current_member(
    group: GroupMetadata, member_id: str, group_instance_id: str | None
) -> ErrorCode | None:
    """Kafka's `validateCurrentMember`: a given group.instance.id must map to `member_id`
    (else FENCED_INSTANCE_ID, or UNKNOWN_MEMBER_ID when it maps to nothing), and `member_id`
    must be a member (else UNKNOWN_MEMBER_ID). None when valid."""
    if group_instance_id is not None:
        current = group.current_static_member_id(group_instance_id)
        if current is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if current != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return None
    if not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    return None


class GroupMembership:
    """Membership requests and rebalance timers of every group of one coordinator's store."""

    def __init__(self, store: GroupStore) -> None:
        self.store = store
        self.config = store.config

    @staticmethod
    def _later(delay_ms: int, callback, *args) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback, *args)

    # -- JoinGroup -----------------------------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: Protocols,
        session_timeout_ms: int,
        rebalance_timeout_ms: int = -1,
        client_id: str = "",
        client_host: str = "",
        *,
        api_version: int,
    ) -> JoinResult:
        """Handle a JoinGroup; see the module docstring. `rebalance_timeout_ms` -1 for v0 (the
        session timeout is used); MEMBER_ID_REQUIRED applies from v4, SkipAssignment from v9."""
        store = self.store
        error = store.check_group_status(group_id)
        if error is not None:
            return JoinResult(error, member_id=member_id)
        config = self.config
        if not config.min_session_timeout_ms <= session_timeout_ms <= config.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has none: Kafka uses the session timeout
            rebalance_timeout_ms = session_timeout_ms
        protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        group = store.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = store.add_group(group_id)
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member, "group.max.size reached")
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
        waiter = asyncio.get_running_loop().create_future()
        request = _JoinRequest(
            waiter, group_instance_id, protocol_type, protocols, session_timeout_ms,
            rebalance_timeout_ms, client_id, client_host,
            require_known_member_id=api_version >= 4,
            support_skipping_assignment=api_version >= 9,
        )  # fmt: skip
        if member_id:
            result = self._current_member_join(group, member_id, request)
        else:
            result = self._new_member_join(group, request)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        if result is not None:
            return result
        return await waiter

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Kafka's `acceptJoiningMember` (group.max.size)."""
        max_size = self.config.max_size
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            awaiting = sum(1 for m in group.members.values() if m.is_awaiting_join)
            return (member is not None and member.is_awaiting_join) or awaiting < max_size
        return group.has(member_id) or len(group.members) < max_size

    def _new_member_join(self, group: GroupMetadata, req: _JoinRequest) -> JoinResult | None:
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        new_member_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        instance = req.group_instance_id
        if instance is not None:
            old_member_id = group.current_static_member_id(instance)
            if old_member_id is not None:
                log.info(
                    "static member %s of group %s rejoined (%s): replacing member id %s",
                    instance, group.group_id, group.state.value, old_member_id,
                )  # fmt: skip
                return self._replace_static_member(group, old_member_id, new_member_id, req)
            self._add_member_and_rebalance(group, new_member_id, req)
            return None
        if req.require_known_member_id:
            timer = self._later(
                req.session_timeout_ms, self._on_pending_member_expired, group, new_member_id
            )
            group.pending_members[new_member_id] = timer
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id)
        self._add_member_and_rebalance(group, new_member_id, req)
        return None

    def _current_member_join(
        self, group: GroupMetadata, member_id: str, req: _JoinRequest
    ) -> JoinResult | None:
        def fail(error: ErrorCode) -> JoinResult:
            return JoinResult(error, member_id=member_id)

        if group.is_(GroupState.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_members:
            if req.group_instance_id is not None:  # pending ids are only given to dynamic members
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            self._add_member_and_rebalance(group, member_id, req)
            return None
        instance = req.group_instance_id
        if group.is_static_member_fenced(instance, member_id):
            return fail(ErrorCode.FENCED_INSTANCE_ID)
        if not group.has(member_id) or (
            instance is not None and group.current_static_member_id(instance) is None
        ):
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, "member rejoined")
            return None
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):  # a lost JoinGroup response: answer it again
                return group.join_result_for(member_id, with_members=group.is_leader(member_id))
            self._update_member_and_rebalance(group, member, req, "member metadata changed")
            return None
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                self._update_member_and_rebalance(group, member, req, "leader or metadata change")
                return None
            return group.join_result_for(member_id, with_members=False)
        return fail(ErrorCode.UNKNOWN_MEMBER_ID)  # EMPTY: the member is long gone

    def _add_member_and_rebalance(
        self, group: GroupMetadata, member_id: str, req: _JoinRequest
    ) -> None:
        member = MemberMetadata(
            member_id, req.group_instance_id, req.client_id, req.client_host,
            req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
            list(req.protocols), is_new=True,
        )  # fmt: skip
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, req.waiter)
        # a new member cannot heartbeat before its JoinGroup is answered: give it longer
        self.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, f"adding member {member_id}")

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, req: _JoinRequest, reason: str
    ) -> None:
        group.update_member(member, req.protocols, req.waiter)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        self._maybe_prepare_rebalance(group, f"{reason}: {member.member_id}")

    def _replace_static_member(
        self, group: GroupMetadata, old_member_id: str, new_member_id: str, req: _JoinRequest
    ) -> JoinResult | None:
        """Kafka's `updateStaticMemberAndRebalance`."""
        current_leader = group.leader_id
        instance = req.group_instance_id or ""
        member = group.replace_static_member(instance, old_member_id, new_member_id)
        old_protocols = list(member.protocols)
        self.schedule_heartbeat(group, member)
        group.update_member(member, req.protocols, req.waiter)
        member.client_id, member.client_host = req.client_id, req.client_host
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        state = group.state
        if state is GroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                write = self.store.write_group(group, assignment)
                self.store.spawn(
                    self._finish_static_replace(
                        group,
                        member,
                        instance,
                        old_member_id,
                        old_protocols,
                        current_leader,
                        req.support_skipping_assignment,
                        write,
                    )  # fmt: skip
                )
            else:
                self._maybe_prepare_rebalance(group, f"static member {instance} changed protocol")
        elif state is GroupState.COMPLETING_REBALANCE:
            # the leader may already assign to the old member id: rebalance again
            self._prepare_rebalance(group, f"static member {instance} rejoined while completing")
        elif state is not GroupState.PREPARING_REBALANCE:
            raise RuntimeError(f"static member {instance} of {group} in state {state.value}")
        return None

    async def _finish_static_replace(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        instance: str,
        old_member_id: str,
        old_protocols: list[tuple[str, bytes]],
        current_leader: str | None,
        support_skipping_assignment: bool,
        write: PendingWrite,
    ) -> None:
        error = await self.store.await_write(write, STORE_GROUP_ERRORS)
        new_member_id = member.member_id
        if error != ErrorCode.NONE:
            log.warning("group %s: storing static member %s failed: %s",
                           group.group_id, instance, error.name)  # fmt: skip
            waiter, member.join_waiter = member.join_waiter, None
            group.update_member(member, old_protocols, None)
            if group.members.get(new_member_id) is member:
                group.replace_static_member(instance, new_member_id, old_member_id)
                self.schedule_heartbeat(group, member)
            if waiter is not None and not waiter.done():
                waiter.set_result(
                    JoinResult(
                        error,
                        generation_id=group.generation_id,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=current_leader or "",
                    )  # fmt: skip
                )
            return
        if support_skipping_assignment:
            # JoinGroup v9 (KIP-814): the leader learns it leads but skips the assignor
            is_leader = group.is_leader(new_member_id)
            result = group.join_result_for(new_member_id, with_members=is_leader)
            result = replace(result, skip_assignment=is_leader)
        else:
            # before v9: report the old leader id so the new member does not assign
            result = JoinResult(
                ErrorCode.NONE, member_id=new_member_id, generation_id=group.generation_id,
                protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                leader=current_leader or "",
            )  # fmt: skip
        member.complete_join(result)

    # -- rebalance -----------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
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
            group.join_timer = self._later(group.rebalance_timeout_ms, self._on_join_timeout, group)
            self._try_complete_join(group)

    def _schedule_initial_join(
        self, group: GroupMetadata, delay_ms: int, remaining_ms: int
    ) -> None:
        group.join_is_initial = True
        group.join_timer = self._later(delay_ms, self._on_initial_join_timer, group, remaining_ms)

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
        self._complete_join(group)

    def _on_join_timeout(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """Finish the rebalance now if every member rejoined (never during the initial delay)."""
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and not group.join_is_initial
            and group.has_all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
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
            group.join_timer = self._later(group.rebalance_timeout_ms, self._on_join_timeout, group)
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

    # -- SyncGroup -----------------------------------------------------------------------------

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
        """Handle a SyncGroup; see the module docstring. `assignments` (member id -> bytes)
        only from the leader."""
        assignments = assignments or {}
        error = self.store.check_group_status(group_id)
        if error is not None:
            return SyncResult(error)
        group = self.store.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = validate_current_member(group, member_id, group_instance_id)
        if error is None and generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is None and protocol_type is not None and protocol_type != group.protocol_type:
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is None and protocol_name is not None and protocol_name != group.protocol_name:
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return SyncResult(error)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        if group.is_(GroupState.STABLE):
            self._remove_pending_sync_member(group, member_id)
            self.schedule_heartbeat(group, member)
            return SyncResult(
                ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
        if not group.is_(GroupState.COMPLETING_REBALANCE):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        waiter = asyncio.get_running_loop().create_future()
        member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))  # a duplicate request
        member.sync_waiter = waiter
        self._remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            write = self.store.write_group(group, assignment)
            self.store.spawn(self._finish_sync_store(group, group.generation_id, assignment, write))
        return await waiter

    async def _finish_sync_store(
        self,
        group: GroupMetadata,
        generation_id: int,
        assignment: dict[str, bytes],
        write: PendingWrite,
    ) -> None:
        error = await self.store.await_write(write, STORE_GROUP_ERRORS)
        if not group.is_(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation_id:
            return  # the group moved on while the record was written
        if error != ErrorCode.NONE:
            log.warning("group %s: storing the assignment failed: %s",
                           group.group_id, error.name)  # fmt: skip
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, "storing the assignment failed")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
            result = SyncResult(
                ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
            if member.complete_sync(result):
                self.schedule_heartbeat(group, member)
        group.transition_to(GroupState.STABLE, self.store.now_ms())

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.complete_sync(SyncResult(error)):
                self.schedule_heartbeat(group, member)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self._cancel_sync_timer(group)
        group.sync_timer = self._later(
            group.rebalance_timeout_ms, self._on_pending_sync_expired, group, group.generation_id
        )

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
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
        self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    # -- Heartbeat and LeaveGroup --------------------------------------------------------------

    async def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """Handle a Heartbeat; see the module docstring."""
        error = self.store.check_group_status(group_id)
        if error is not None:
            return error
        group = self.store.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = validate_current_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, group.members[member_id])
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Handle a LeaveGroup: `(member_id, group_instance_id)` per leaving member (v3+ batch;
        an empty member id removes the static member by instance id). Returns the top-level
        error and one error per member."""
        error = self.store.check_group_status(group_id)
        if error is not None:
            return error, []
        group = self.store.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        for member_id, instance in members:
            if not member_id:
                current = group.current_static_member_id(instance)
                if current is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                member_id = current
            elif group.remove_pending_member(member_id):
                if group.is_(GroupState.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                errors.append(ErrorCode.NONE)
                continue
            else:
                error = validate_current_member(group, member_id, instance)
                if error is not None:
                    errors.append(error)
                    continue
            log.info("member %s is leaving group %s", member_id, group_id)
            self._remove_member_and_update_group(
                group, group.members[member_id], "member left the group"
            )
            errors.append(ErrorCode.NONE)
        return ErrorCode.NONE, errors

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"{reason}: {member.member_id}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # -- timers --------------------------------------------------------------------------------

    def schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        member.cancel_heartbeat()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._later(timeout, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.is_(GroupState.DEAD) or group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            self.schedule_heartbeat(group, member)  # waiting in a rebalance counts as alive
            return
        log.info("group %s: member %s session timed out", group.group_id, member.member_id)
        self._remove_member_and_update_group(group, member, "session timeout")

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.pop(member_id, None)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

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


@dataclass(slots=True)
class _JoinRequest:
    """The fields of one JoinGroup request the join paths pass around."""

    waiter: asyncio.Future
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool
    support_skipping_assignment: bool
