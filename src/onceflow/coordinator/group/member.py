"""One member of a classic group (Kafka's `MemberMetadata`) and the results members wait for.

A member that sent JoinGroup and waits for the rebalance to finish holds a `join_waiter`
future; one that sent SyncGroup and waits for the leader's assignment holds a `sync_waiter`.
The coordinator completes them (`complete_join`, `complete_sync`); a cancelled request (the
client went away) leaves a done future behind, which completing again ignores.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from onceflow.protocol.errors import ErrorCode

__all__ = ["JoinMember", "JoinResult", "MemberMetadata", "SyncResult"]

Protocols = Sequence[tuple[str, bytes]]  # (protocol name, member metadata), in preference order


@dataclass(frozen=True)
class JoinMember:
    """A member as the leader sees it in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    """What a JoinGroup request is answered with."""

    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinMember, ...] = ()


@dataclass(frozen=True)
class SyncResult:
    """What a SyncGroup request is answered with."""

    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False)
class MemberMetadata:
    """A member of a group: identity, timeouts, supported protocols, assignment, waiters."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    join_waiter: asyncio.Future[JoinResult] | None = field(default=None, repr=False)
    sync_waiter: asyncio.Future[SyncResult] | None = field(default=None, repr=False)
    heartbeat_timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        """True for a member with a group.instance.id (KIP-345)."""
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        """True while the member's JoinGroup waits for the rebalance."""
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        """True while the member's SyncGroup waits for the leader's assignment."""
        return self.sync_waiter is not None

    def protocol_names(self) -> list[str]:
        """The member's protocols, in its preference order."""
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for `protocol` (b"" if it does not support it)."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        return b""

    def matches(self, protocols: Protocols) -> bool:
        """True when `protocols` equals the member's current protocols, order included."""
        if len(protocols) != len(self.protocols):
            return False
        return all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1])
            for a, b in zip(protocols, self.protocols, strict=True)
        )

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among `candidates` (Kafka's `vote`)."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def complete_join(self, result: JoinResult) -> bool:
        """Answer the waiting JoinGroup, if any; True when a waiter was there."""
        waiter, self.join_waiter = self.join_waiter, None
        if waiter is None:
            return False
        if not waiter.done():
            waiter.set_result(result)
        return True

    def complete_sync(self, result: SyncResult) -> bool:
        """Answer the waiting SyncGroup, if any; True when a waiter was there."""
        waiter, self.sync_waiter = self.sync_waiter, None
        if waiter is None:
            return False
        if not waiter.done():
            waiter.set_result(result)
        return True

    def cancel_heartbeat(self) -> None:
        """Stop the member's session timer."""
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None
