"""DescribeCluster handler.

API: DescribeCluster (key 60), versions 0-2.

Behaviour: reports this single node as the only broker and the controller, with the persisted
cluster id. With `include_cluster_authorized_operations` the answer carries the operations the
caller may perform on the cluster (`broker.authorized_ops`; with no authorizer, all seven
Kafka supports), otherwise INT32_MIN as in Kafka.

Authorization (authorizer on): the request is not checked (as Kafka); the authorized
operations are 0 when the caller may not DESCRIBE the cluster.

Versions: v1 adds endpoint_type; only brokers (1) are served, asking for controllers (2)
gets UNSUPPORTED_ENDPOINT_TYPE as in Kafka when the request goes to a broker. v2 adds
include_fenced_brokers and each broker's is_fenced (KIP-1073): the one node is never fenced,
so the flag changes nothing and is_fenced is always false (`kafka-cluster list-endpoints
--include-fenced-brokers` needs v2).

Deviations: none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.broker.authorized_ops import AUTHORIZED_OPERATIONS_OMITTED, authorized_operations
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_cluster import DescribeClusterResponse
from onceflow.security.acl import ResourceType

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_cluster import DescribeClusterRequest

_ENDPOINT_BROKERS = 1


async def handle_describe_cluster(
    ctx: RequestContext, header: RequestHeader, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    """Describe the one-node cluster."""
    broker = ctx.broker
    if header.request_api_version >= 1 and request.endpoint_type != _ENDPOINT_BROKERS:
        return DescribeClusterResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"endpoint type {request.endpoint_type} is not served by a broker",
            endpoint_type=request.endpoint_type,
            cluster_id=broker.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations:
        operations = (
            0
            if denied(ctx, ApiKey.DESCRIBE_CLUSTER, "cluster") is not None
            else authorized_operations(ctx, ResourceType.CLUSTER, None)
        )
    address = ctx.advertised
    return DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=_ENDPOINT_BROKERS,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(
                broker_id=broker.node_id,
                host=address.host,
                port=address.port,
                rack=None,
                is_fenced=False,
            )
        ],
        cluster_authorized_operations=operations,
    )
