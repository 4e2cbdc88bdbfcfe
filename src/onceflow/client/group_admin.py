"""Consumer-group administration for `AdminClient`: ListGroups, DescribeGroups, DeleteGroups.

Kafka's `listConsumerGroups`, `describeConsumerGroups` and `deleteConsumerGroups` for classic
groups. ListGroups goes to every broker Metadata names; DescribeGroups and DeleteGroups go to
each group's coordinator, retrying while the coordinator loads or moves (up to
request.timeout.ms). Member assignments of `consumer` groups are decoded into partitions.
The functions send through the AdminClient's `AdminConnections` (its connections and
coordinator cache; split off to keep admin.py readable).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TypeVar

from onceflow.client.admin_connections import GROUP_KEY, AdminConnections, known_code
from onceflow.client.consumer.group.protocol import decode_assignment
from onceflow.client.errors import raise_for_error
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.message import Message, Request
from onceflow.protocol.messages.delete_groups import DeleteGroupsRequest
from onceflow.protocol.messages.describe_groups import DescribeGroupsRequest
from onceflow.protocol.messages.list_groups import ListGroupsRequest

__all__ = ["GroupDescription", "GroupListing", "MemberDescription"]

_RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}
_RETRY_S = 0.1
_R = TypeVar("_R", bound=Message)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupDescription:
    """A group as DescribeGroups answers; state `Dead` for a group that does not exist."""

    group_id: str
    error_code: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]


def list_groups(net: AdminConnections) -> list[GroupListing]:
    """Every group on every broker, sorted by id."""
    cls = ListGroupsRequest
    out: dict[str, GroupListing] = {}
    for node in net.metadata([])[0]:
        response = net.to_node(node).send(cls())
        if response.error_code != ErrorCode.NONE:
            raise_for_error(response.error_code, "ListGroups")
        for g in response.groups:
            out[g.group_id] = GroupListing(g.group_id, g.protocol_type, g.group_state)
    return [out[g] for g in sorted(out)]


def describe_groups(net: AdminConnections, group_ids: list[str]) -> dict[str, GroupDescription]:
    cls = DescribeGroupsRequest
    out = {}
    for group_id in group_ids:
        g = _send_to_coordinator(net, group_id, cls(groups=[group_id])).groups[0]
        members = tuple(
            MemberDescription(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                tuple(decode_assignment(m.member_assignment))
                if g.protocol_type == "consumer" and m.member_assignment
                else (),
            )
            for m in g.members
        )
        out[group_id] = GroupDescription(
            group_id,
            known_code(g.error_code),
            g.group_state,
            g.protocol_type,
            g.protocol_data,
            members,
        )
    return out


def delete_groups(net: AdminConnections, group_ids: list[str]) -> dict[str, ErrorCode]:
    """DeleteGroups per group: NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ..."""
    cls = DeleteGroupsRequest
    out = {}
    for group_id in group_ids:
        response = _send_to_coordinator(net, group_id, cls(groups_names=[group_id]))
        out[group_id] = known_code(response.results[0].error_code)
    return out


def _send_to_coordinator(net: AdminConnections, group_id: str, request: Request[_R]) -> _R:
    """Send to the group's coordinator, retrying coordinator loads and moves."""
    deadline = time.monotonic() + net.request_timeout_ms / 1000
    while True:
        conn = net.to_coordinator(GROUP_KEY, group_id, deadline)
        response = conn.send(request)
        codes = [getattr(response, "error_code", 0)]
        codes += [g.error_code for g in getattr(response, "groups", ())]
        codes += [r.error_code for r in getattr(response, "results", ())]
        retry = next((c for c in codes if c in _RETRIABLE), None)
        if retry is None or time.monotonic() >= deadline:
            return response
        net.forget_coordinator(GROUP_KEY, group_id)
        time.sleep(_RETRY_S)
