"""AlterUserScramCredentials handler.

API: AlterUserScramCredentials (key 51), version 0 (KIP-554).

Behaviour: needs ALTER on the CLUSTER, else every user named in the request gets
CLUSTER_AUTHORIZATION_FAILED (one result per user, sorted, as Kafka's `getErrorResponse`).
Deletions and upsertions are applied by `security.credentials.ScramCredentialStore.alter`
with Kafka's `ScramControlManager` rules: an upsertion carries the client-computed salted
password, salt and iteration count (4096-16384, else UNACCEPTABLE_CREDENTIAL); an unknown
mechanism is UNSUPPORTED_SASL_MECHANISM; deleting a credential the user does not have is
RESOURCE_NOT_FOUND; a user named twice in one request is DUPLICATE_RESOURCE and none of its
alterations apply. The valid ones are written together, durably (fsync, in a worker thread so
the event loop keeps serving), before the answer. The SASL servers read the store on every
login, so a new or changed credential takes effect at the next login; sessions already
authenticated keep going until they end or re-authenticate (`connections.max.reauth.ms`),
as in Kafka. When the store cannot be written every user is UNKNOWN_SERVER_ERROR and nothing
changes.

Versions: v0 only (flexible); the only version Kafka has.

Deviations: none known.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsResponse,
)
from onceflow.security.credentials import ScramCredentialDeletion, ScramCredentialUpsertion

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.alter_user_scram_credentials import (
        AlterUserScramCredentialsRequest,
    )

log = logging.getLogger("onceflow.broker.alter_user_scram_credentials")

_Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
CLUSTER_AUTHORIZATION_MESSAGE = "Cluster authorization failed."


def _all(
    request: AlterUserScramCredentialsRequest, error: ErrorCode, message: str | None
) -> AlterUserScramCredentialsResponse:
    users = {d.name for d in request.deletions} | {u.name for u in request.upsertions}
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[_Result(user=u, error_code=error, error_message=message) for u in sorted(users)],
    )


async def handle_alter_user_scram_credentials(
    ctx: RequestContext, header: RequestHeader, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    """Delete and upsert SCRAM credentials, durably."""
    error = denied(ctx, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "cluster")
    if error is not None:
        who = f"{ctx.peer} ({ctx.principal})"
        log.info("AlterUserScramCredentials from %s refused: %s", who, error.name)
        return _all(request, error, CLUSTER_AUTHORIZATION_MESSAGE)
    deletions = [ScramCredentialDeletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [
        ScramCredentialUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
        for u in request.upsertions
    ]
    try:
        results = await asyncio.to_thread(
            ctx.broker.credential_store().alter, deletions, upsertions
        )
    except OSError as exc:
        log.error("cannot store the SCRAM credentials: %s", exc)
        return _all(request, ErrorCode.UNKNOWN_SERVER_ERROR, f"cannot store the credentials: {exc}")
    for r in results:
        outcome = "done" if r.error_code == ErrorCode.NONE else ErrorCode(r.error_code).name
        log.info(
            "AlterUserScramCredentials from %s (%s): user %s %s",
            ctx.peer,
            ctx.principal,
            r.user,
            outcome,
        )
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            _Result(user=r.user, error_code=r.error_code, error_message=r.error_message)
            for r in results
        ],
    )
