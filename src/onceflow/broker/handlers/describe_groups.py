"""DescribeGroups handler.

API: DescribeGroups (key 15), versions 0-6.

Behaviour: per group id, its state (Kafka's names: Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead), protocol type, chosen protocol and members (client id,
client host, group instance id; metadata and assignment only while STABLE). An unknown group
is reported with state Dead and NONE before v6, GROUP_ID_NOT_FOUND from v6 (KIP-1043), as
Kafka does.

Versions: v1 throttle_time_ms; v3 include_authorized_operations / authorized_operations; v4
group_instance_id; v5 flexible; v6 error_message (null: the code says it all).

Deviations: there are no ACLs, so authorized_operations is the "not provided" value
(-2147483648) even when asked for.
"""

from __future__ import annotations

from onceflow.protocol.messages.describe_groups import DescribeGroupsResponse

_Group = DescribeGroupsResponse.DescribedGroup
_Member = _Group.DescribedGroupMember


async def handle_describe_groups(ctx, header, request) -> DescribeGroupsResponse:
    """Describe each requested group."""
    descriptions = await ctx.broker.group_coordinator.describe_groups(
        list(request.groups), api_version=header.request_api_version
    )
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
            )
            for d in descriptions
        ],
    )
