"""ApiVersions handler.

API: ApiVersions (key 18), versions 0-4.

Behaviour: lists every API and version range this broker serves (`SUPPORTED_VERSIONS`). From
v3 on the response carries empty supported/finalized feature lists and epoch -1: this broker
has no feature flags (no KRaft metadata.version to negotiate). A v3+ request with an invalid
client software name or version gets INVALID_REQUEST, as in Kafka (KIP-511).

Versions: v1 adds throttle_time_ms; v3 is flexible and adds the client software fields and the
tagged feature fields. The response header is always v0. An ApiVersions request of an unknown
version never reaches this handler: the connection answers UNSUPPORTED_VERSION in v0 format.

Deviations: none known.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from onceflow.broker.served_versions import supported_api_keys
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.api_versions import ApiVersionsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.api_versions import ApiVersionsRequest

# Kafka's ApiVersionsRequest.isValid pattern for client software name and version
_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


async def handle_api_versions(
    ctx: RequestContext, header: RequestHeader, request: ApiVersionsRequest
) -> ApiVersionsResponse:
    """Answer with the served API versions (and INVALID_REQUEST for bad software fields)."""
    error = ErrorCode.NONE
    if header.request_api_version >= 3:
        name = request.client_software_name or ""
        version = request.client_software_version or ""
        if not (_SOFTWARE_PATTERN.fullmatch(name) and _SOFTWARE_PATTERN.fullmatch(version)):
            error = ErrorCode.INVALID_REQUEST
    return ApiVersionsResponse(
        error_code=error,
        api_keys=supported_api_keys(ApiVersionsResponse),
        throttle_time_ms=0,
        supported_features=[],
        finalized_features_epoch=-1,
        finalized_features=[],
    )
