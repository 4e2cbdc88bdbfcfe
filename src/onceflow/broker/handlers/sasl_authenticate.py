"""SaslAuthenticate handler.

API: SaslAuthenticate (key 36), versions 0-2.

Behaviour: carries one SASL token of the mechanism chosen by SaslHandshake to its server
(`security.plain`, `security.scram`; the step runs in a thread: PLAIN computes PBKDF2) and
returns the server's token. When the exchange completes, the connection's principal becomes
`User:<name>` and other requests may pass. A rejected login is logged once (client address,
listener, mechanism, the reason; never a password), answered after
`connection.failed.authentication.delay.ms` with SASL_AUTHENTICATION_FAILED (or
ILLEGAL_SASL_STATE) and Kafka's message, and the connection closes. On a connection that is not
expecting a token (PLAINTEXT/SSL listener, already authenticated): ILLEGAL_SASL_STATE and the
connection stays open, as Kafka's KafkaApis answers.

Versions: v1 adds session_lifetime_ms (KIP-368: `connections.max.reauth.ms`, 0 when off);
v2 is flexible.

Deviations: none known.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from onceflow.security.sasl import IllegalSaslStateError, SaslAuthenticationError

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.sasl_authenticate import SaslAuthenticateRequest

log = logging.getLogger("onceflow.broker.auth")

_NOT_EXPECTED = "SaslAuthenticate request received after successful authentication"


async def handle_sasl_authenticate(
    ctx: RequestContext, header: RequestHeader, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    """One step of the SASL exchange."""
    connection = ctx.connection
    if connection is None or connection.authenticator is None:
        return _error(ErrorCode.ILLEGAL_SASL_STATE, _NOT_EXPECTED)
    authenticator = connection.authenticator
    try:
        server = authenticator.expect_token()
    except IllegalSaslStateError as exc:
        return _error(exc.error_code, exc.client_message)
    try:
        token = await asyncio.to_thread(server.step, bytes(request.auth_bytes))
        session_lifetime_ms = authenticator.complete(server) if server.is_complete else 0
    except SaslAuthenticationError as exc:
        authenticator.fail()
        log.warning(
            "failed authentication from %s on listener %s with %s: %s",
            ctx.peer,
            connection.listener_name,
            server.mechanism_name,
            exc.reason,
        )
        connection.begin_drain()  # close once this answer is written
        delay_ms = ctx.broker.config.get("connection.failed.authentication.delay.ms")
        await asyncio.sleep(delay_ms / 1000)
        return _error(exc.error_code, exc.client_message)
    if server.is_complete:
        ctx.principal = authenticator.principal or ctx.principal  # set by `complete`
        log.info(
            "authenticated %s from %s on listener %s with %s",
            ctx.principal,
            ctx.peer,
            connection.listener_name,
            server.mechanism_name,
        )
    return SaslAuthenticateResponse(
        error_code=ErrorCode.NONE,
        error_message=None,
        auth_bytes=token,
        session_lifetime_ms=session_lifetime_ms,
    )


def _error(code: ErrorCode, message: str) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=code, error_message=message, auth_bytes=b"", session_lifetime_ms=0
    )
