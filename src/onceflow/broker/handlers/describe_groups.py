"""DescribeGroups handler.

API: DescribeGroups (key 15), versions 0-6.

Behaviour: per group id, its state (Kafka's names: Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead), protocol type, chosen protocol and members (client id,
client host, group instance id; metadata and assignment only while STABLE). An unknown group
is reported with state Dead and NONE before v6, GROUP_ID_NOT_FOUND from v6 (KIP-1043), as
Kafka does.

Versions: v1 throttle_time_ms; v3 include_authorized_operations / authorized_operations: when
asked for, every group answered without error carries the operations the caller may perform
on it (`broker.authorized_ops`; with no authorizer, all Kafka 4.0 supports on a group: READ,
DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS), otherwise INT32_MIN as in Kafka; v4
group_instance_id; v5 flexible; v6 error_message (null: the code says it all).

Authorization (authorizer on): DESCRIBE on each group, else that group alone is
GROUP_AUTHORIZATION_FAILED with an empty state, as Kafka.

Deviations: none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_names
from onceflow.broker.authorized_ops import AUTHORIZED_OPERATIONS_OMITTED, authorized_operations
from onceflow.coordinator.group.results import GroupSummary
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_groups import DescribeGroupsResponse
from onceflow.security.acl import ResourceType

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_groups import DescribeGroupsRequest

_Group = DescribeGroupsResponse.DescribedGroup
_Member = _Group.DescribedGroupMember


async def handle_describe_groups(
    ctx: RequestContext, header: RequestHeader, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    """Describe each requested group."""
    refused = denied_names(ctx, ApiKey.DESCRIBE_GROUPS, "group", request.groups)
    described = await ctx.broker.group_coordinator.describe_groups(
        [g for g in request.groups if g not in refused], api_version=header.request_api_version
    )
    by_id = iter(described)
    descriptions = [
        GroupSummary(g, ErrorCode.GROUP_AUTHORIZATION_FAILED, state="")
        if g in refused
        else next(by_id)
        for g in request.groups
    ]
    asked = header.request_api_version >= 3 and request.include_authorized_operations

    def operations(d: GroupSummary) -> int:
        if asked and d.error == ErrorCode.NONE:
            return authorized_operations(ctx, ResourceType.GROUP, d.group_id)
        return AUTHORIZED_OPERATIONS_OMITTED

    return DescribeGroupsResponse(
        throttle_time_ms=0,
        groups=[
            _Group(
                error_code=d.error,
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol,
                members=[
                    _Member(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ],
                authorized_operations=operations(d),
            )
            for d in descriptions
        ],
    )
