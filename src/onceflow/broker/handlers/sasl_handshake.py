"""SaslHandshake handler.

API: SaslHandshake (key 17), versions 0-1 (v0 only refused).

Behaviour: on a SASL listener, the first step of the login (`broker.sasl_authenticator`): an
enabled mechanism (`sasl.enabled.mechanisms`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512,
OAUTHBEARER) is accepted and the enabled list returned; another gets
UNSUPPORTED_SASL_MECHANISM with the list, after `connection.failed.authentication.delay.ms`,
and the connection closes, as in Kafka. On an
authenticated connection it starts a re-authentication when `connections.max.reauth.ms` > 0
(KIP-368), else answers ILLEGAL_SASL_STATE. On a PLAINTEXT or SSL listener: ILLEGAL_SASL_STATE,
as Kafka's KafkaApis answers.

Versions: v1: the tokens then travel in SaslAuthenticate requests.

Deviations: v0 (tokens then sent as raw frames with no request header, pre-KIP-152) is
advertised, because librdkafka only starts SASL when the broker's SaslHandshake range includes
v0, but a v0 request is answered UNSUPPORTED_VERSION and the connection closed; every client
this project supports (librdkafka, kafka-python, aiokafka, Java 1.0+) sends v1.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.sasl_handshake import SaslHandshakeResponse
from onceflow.security.sasl import IllegalSaslStateError

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.sasl_handshake import SaslHandshakeRequest

log = logging.getLogger("onceflow.broker.auth")


async def handle_sasl_handshake(
    ctx: RequestContext, header: RequestHeader, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    """Pick the mechanism of this connection's login."""
    connection = ctx.connection
    if connection is None or connection.authenticator is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    authenticator = connection.authenticator
    enabled = list(authenticator.enabled_mechanisms)
    if header.request_api_version == 0:
        log.warning("closing connection from %s: SaslHandshake v0 is not served", ctx.peer)
        authenticator.fail()
        connection.begin_drain()
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, mechanisms=enabled)
    try:
        accepted = authenticator.handshake(request.mechanism)
    except IllegalSaslStateError:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled)
    if accepted:
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)
    log.warning(
        "failed authentication from %s on listener %s: unsupported SASL mechanism %r",
        ctx.peer,
        connection.listener_name,
        request.mechanism,
    )
    connection.begin_drain()  # close once this answer is written
    await asyncio.sleep(ctx.broker.config.get("connection.failed.authentication.delay.ms") / 1000)
    return SaslHandshakeResponse(
        error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled
    )
