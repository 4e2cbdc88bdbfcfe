"""`GroupMembership`: the classic rebalance protocol's requests, one module each.

Follows Kafka's `GroupCoordinator` (the classic-group half, 3.x, with the generation checks of
the 4.x classic path). Every request does its state changes synchronously, then may wait on the
member's join or sync future, which the rebalance completes. The requests live in join.py
(JoinGroup), sync.py (SyncGroup) and heartbeat_leave.py (Heartbeat, LeaveGroup); the rebalance
itself and its timers in rebalance.py (`Rebalancer`, which `GroupMembership` extends). Session
timeouts remove members (not while they wait in a rebalance, except new members, which get
`NewMemberJoinTimeoutMs`).

Deviation: a removed member's pending SyncGroup is answered UNKNOWN_MEMBER_ID (Kafka leaves it
to time out).
"""

from __future__ import annotations

from onceflow.coordinator.group.heartbeat_leave import handle_heartbeat, handle_leave_group
from onceflow.coordinator.group.join import handle_join_group
from onceflow.coordinator.group.rebalance import Rebalancer
from onceflow.coordinator.group.sync import handle_sync_group

__all__ = ["GroupMembership"]


class GroupMembership(Rebalancer):
    """Membership requests and rebalance timers of every group of one coordinator's store.

    The `Rebalancer` (its timers, `schedule_heartbeat`, `close_group`, `drop_group`) with one
    method per request: each the function of that request's module, called with this object."""

    join = handle_join_group
    sync = handle_sync_group
    heartbeat = handle_heartbeat
    leave = handle_leave_group
