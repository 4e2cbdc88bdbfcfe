"""DescribeUserScramCredentials handler.

API: DescribeUserScramCredentials (key 50), version 0 (KIP-554).

Behaviour: needs DESCRIBE on the CLUSTER, else the request's top-level error is
CLUSTER_AUTHORIZATION_FAILED with no results, as Kafka's `getErrorResponse`. A null or empty
user list describes every user; otherwise each named user gets its mechanisms and iteration
counts, RESOURCE_NOT_FOUND when it has no credential, DUPLICATE_RESOURCE when named twice
(`security.credentials.ScramCredentialStore.describe`, Kafka's `ScramImage.describe` rules and
messages). Salts and keys are never answered. A read of the in-memory store: no I/O.

Versions: v0 only (flexible); the only version Kafka has.

Deviations: none known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsResponse,
)

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_user_scram_credentials import (
        DescribeUserScramCredentialsRequest,
    )

_Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = _Result.CredentialInfo
CLUSTER_AUTHORIZATION_MESSAGE = "Cluster authorization failed."


async def handle_describe_user_scram_credentials(
    ctx: RequestContext, header: RequestHeader, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    """The SCRAM mechanisms and iterations of the requested users (every user for null)."""
    error = denied(ctx, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "cluster")
    if error is not None:
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=error,
            error_message=CLUSTER_AUTHORIZATION_MESSAGE,
            results=[],
        )
    names = None if request.users is None else [u.name for u in request.users]
    results = ctx.broker.credential_store().describe(names)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        results=[
            _Result(
                user=r.user,
                error_code=r.error_code,
                error_message=r.error_message,
                credential_infos=[
                    _Info(mechanism=i.mechanism, iterations=i.iterations)
                    for i in r.credential_infos
                ],
            )
            for r in results
        ],
    )
