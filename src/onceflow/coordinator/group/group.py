"""One classic group's membership state (Kafka's `GroupMetadata`), without I/O or timers.

Holds the state (moved only through `transition_to`, which checks `state.VALID_PREVIOUS`), the
generation, the chosen protocol, the leader, the members and the static-member map
(group.instance.id -> member id, KIP-345), the pending members (member ids handed out with
MEMBER_ID_REQUIRED, KIP-394), the members that still owe a SyncGroup, and the group's offsets
(`offsets.GroupOffsets`). The coordinator drives it; timers live in the coordinator.
"""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from collections.abc import Sequence

from onceflow.coordinator.group.member import JoinMember, JoinResult, MemberMetadata, SyncResult
from onceflow.coordinator.group.offsets import GroupOffsets
from onceflow.coordinator.group.state import GroupState, can_transition, check_transition
from onceflow.protocol.errors import ErrorCode

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "GroupMetadata",
    "subscribed_topics_of",
    "validate_current_member",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def subscribed_topics_of(metadata: bytes) -> list[str] | None:
    """Topics of a consumer-protocol subscription (`ConsumerProtocolSubscription`: int16
    version, then the topic array, in every version), None when it cannot be parsed."""
    try:
        (version,) = _INT16.unpack_from(metadata, 0)
        if version < 0:
            return None
        (count,) = _INT32.unpack_from(metadata, 2)
        pos = 6
        topics = []
        for _ in range(count):
            (length,) = _INT16.unpack_from(metadata, pos)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.append(bytes(metadata[pos : pos + length]).decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class GroupMetadata:
    """Membership of one group. Mutated only from the event loop."""

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}
        self.pending_sync: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None
        self.offsets = GroupOffsets()
        self.join_timer: asyncio.TimerHandle | None = None
        self.join_is_initial = False  # the join timer is the initial delay (never completes early)
        self.sync_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
            f"members={list(self.members)})"
        )

    # -- state ---------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        """True when the group is in `state`."""
        return self.state is state

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Move to `target`; raises `IllegalGroupStateTransition` when the table forbids it."""
        check_transition(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp_ms = now_ms

    @property
    def can_rebalance(self) -> bool:
        """True when PREPARING_REBALANCE may be entered from the current state."""
        return can_transition(self.state, GroupState.PREPARING_REBALANCE)

    # -- members -------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        """True for a current (not pending) member."""
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        """True when `member_id` leads the group."""
        return self.leader_id == member_id

    def add(self, member: MemberMetadata, join_waiter: asyncio.Future[JoinResult] | None) -> None:
        """Add a member (the first one fixes the protocol type and becomes leader)."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.join_waiter = join_waiter
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.remove_pending_member(member.member_id)

    def remove_pending_member(self, member_id: str) -> bool:
        """Forget a MEMBER_ID_REQUIRED member id (and its expiry timer); True if it was one."""
        if member_id not in self.pending_members:
            return False
        timer = self.pending_members.pop(member_id)
        if timer is not None:
            timer.cancel()
        return True

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Remove a member; a new leader is picked among the others if it led."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()  # drop zero counts
        member.cancel_heartbeat()
        self.pending_sync.discard(member_id)
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: Sequence[tuple[str, bytes]],
        join_waiter: asyncio.Future[JoinResult] | None,
    ) -> None:
        """Replace a member's protocols and (re)set its join waiter."""
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols += Counter()
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names())
        member.join_waiter = join_waiter

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        """Member id currently registered for a group.instance.id."""
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """True when `group_instance_id` belongs to a member id other than `member_id`."""
        current = self.current_static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(
        self, group_instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give the static member a new member id; a request still waiting under the old id is
        answered FENCED_INSTANCE_ID (Kafka's `replaceStaticMember`)."""
        member = self.members.pop(old_member_id)
        member.complete_join(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id))
        member.complete_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    # -- protocol ------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: Sequence[str]) -> bool:
        """May a member with this protocol type and these protocols join (Kafka's rule)?"""
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in protocols
        )

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports."""
        count = len(self.members)
        return [name for name, n in self.supported_protocols.items() if n == count]

    def select_protocol(self) -> str:
        """The protocol most members prefer among those all support (ties: the one that
        comes first in the leader's preference)."""
        candidates = set(self.candidate_protocols())
        if not candidates:
            raise RuntimeError(f"group {self.group_id}: no protocol supported by every member")
        votes = Counter(member.vote(candidates) for member in self.members.values())
        order = self._leader_order()
        return max(votes, key=lambda name: (votes[name], -order.get(name, len(order))))

    def _leader_order(self) -> dict[str, int]:
        leader = self.members.get(self.leader_id or "")
        names = leader.protocol_names() if leader else []
        return {name: i for i, name in enumerate(names)}

    # -- rebalance -----------------------------------------------------------------------------

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout of the members (how long a rebalance may wait)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        """Every member rejoined and no MEMBER_ID_REQUIRED member is still expected."""
        joined = sum(1 for m in self.members.values() if m.is_awaiting_join)
        return joined == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        """Members that have not sent JoinGroup during this rebalance."""
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else make the first rejoined member the leader;
        False when no member rejoined."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        """Bump the generation, choose the protocol, go to COMPLETING_REBALANCE (or EMPTY)."""
        self.generation_id += 1
        self.pending_sync.clear()
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = subscribed_topics_of(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """True when a member may consume `topic` (unknown subscriptions count as yes)."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def current_member_metadata(self) -> tuple[JoinMember, ...]:
        """What the leader receives in its JoinGroup response."""
        protocol = self.protocol_name or ""
        return tuple(
            JoinMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def join_result_for(self, member_id: str, *, with_members: bool) -> JoinResult:
        """A successful JoinGroup answer for `member_id` in the current generation."""
        return JoinResult(
            ErrorCode.NONE,
            member_id=member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=self.current_member_metadata() if with_members else (),
        )


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
