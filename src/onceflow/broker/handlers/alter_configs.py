"""AlterConfigs handler.

API: AlterConfigs (key 33), versions 0-2.

Behaviour: for each TOPIC resource (type 2) the given configs replace the topic's whole set of
overrides (keys not given go back to their defaults, as in Kafka), validated exactly as at
creation: an unknown key or a bad value is INVALID_CONFIG and changes nothing; a missing topic
is UNKNOWN_TOPIC_OR_PARTITION. The new set is written durably before the answer and applies to
every partition at once. With validate_only nothing is stored. A key listed twice is
INVALID_REQUEST. BROKER resources (type 4): onceflow's own broker configs are static, so a
change is INVALID_REQUEST naming the keys; Kafka's dynamic configs for features onceflow lacks
(SSL/SASL, thread pools, the log cleaner, replication throttles) are stored durably and
described but change nothing (`broker.dynamic_configs`). Other types: INVALID_REQUEST.

Versions: v1 same as v0; v2 flexible.

Authorization (authorizer on): ALTER_CONFIGS on a TOPIC resource's topic, else
TOPIC_AUTHORIZATION_FAILED; on the CLUSTER for a BROKER resource, else
CLUSTER_AUTHORIZATION_FAILED; a denied resource is not changed, as Kafka.

Deviations: dynamic broker configs are stored without effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_config
from onceflow.broker.config_changes import SET, Change, alter_all
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.alter_configs import AlterConfigsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.errors import ErrorCode
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.alter_configs import AlterConfigsRequest

    _Resource = AlterConfigsRequest.AlterConfigsResource

_Result = AlterConfigsResponse.AlterConfigsResourceResponse


async def handle_alter_configs(
    ctx: RequestContext, header: RequestHeader, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    """Replace topic overrides (validated, durable)."""

    def changes_of(r: _Resource) -> list[Change]:
        return [(c.name, SET, c.value) for c in r.configs]

    def refused(r: _Resource) -> ErrorCode | None:
        return denied_config(ctx, ApiKey.ALTER_CONFIGS, r.resource_type, r.resource_name)

    results = alter_all(ctx.broker, request, _Result, changes_of, replace=True, refused=refused)
    return AlterConfigsResponse(throttle_time_ms=0, responses=results)
