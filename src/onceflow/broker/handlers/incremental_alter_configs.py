"""IncrementalAlterConfigs handler.

API: IncrementalAlterConfigs (key 44), versions 0-1.

Behaviour: for each TOPIC resource (type 2) applies each change to the topic's overrides:
SET (0) a value, DELETE (1) an override (back to the default), APPEND (2) / SUBTRACT (3)
items of a list config (cleanup.policy, the throttled-replica lists; other keys are
INVALID_CONFIG "Config value append is not allowed ..."). The result is validated exactly as
at creation (INVALID_CONFIG changes nothing), written durably before the answer and applied
to every partition; with validate_only nothing is stored. A missing topic is
UNKNOWN_TOPIC_OR_PARTITION, a key listed twice INVALID_REQUEST, a null value for SET or
APPEND INVALID_REQUEST. BROKER resources and other resource types are answered as AlterConfigs
answers them (`alter_configs.py`: dynamic broker configs stored without effect).

Versions: v1 flexible.

Authorization (authorizer on): as AlterConfigs (ALTER_CONFIGS on the topic or the CLUSTER; a
denied resource is not changed).

Deviations: dynamic broker configs are stored without effect.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied_config
from onceflow.broker.config_changes import Change, alter_all
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.errors import ErrorCode
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

    _Resource = IncrementalAlterConfigsRequest.AlterConfigsResource

_Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


async def handle_incremental_alter_configs(
    ctx: RequestContext, header: RequestHeader, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    """Apply SET/DELETE/APPEND/SUBTRACT to topic overrides (validated, durable)."""

    def changes_of(r: _Resource) -> list[Change]:
        return [(c.name, c.config_operation, c.value) for c in r.configs]

    def refused(r: _Resource) -> ErrorCode | None:
        return denied_config(
            ctx, ApiKey.INCREMENTAL_ALTER_CONFIGS, r.resource_type, r.resource_name
        )

    results = alter_all(ctx.broker, request, _Result, changes_of, replace=False, refused=refused)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)
