"""The broker's SASL authenticator with OAUTHBEARER (broker.sasl_authenticator): the principal
is the token's sub, and with connections.max.reauth.ms (KIP-368) the session ends when the
token expires if that comes first, as in Kafka; without a validator the mechanism is refused."""

from __future__ import annotations

import pytest
from support.oidc_issuer import unsecured_token

from onceflow.broker.sasl_authenticator import AuthState, SaslAuthenticator
from onceflow.security.credentials import ScramCredentialStore
from onceflow.security.jwt import UnsecuredValidator
from onceflow.security.sasl import IllegalSaslStateError

NOW = 1_000_000.0


def authenticator(tmp_path, max_reauth_ms: int, validator=None) -> SaslAuthenticator:
    return SaslAuthenticator(
        ScramCredentialStore(str(tmp_path)),
        ["OAUTHBEARER"],
        max_reauth_ms,
        clock=lambda: 0.0,
        token_validator=validator or UnsecuredValidator(),
        wall_clock=lambda: NOW,
    )


def login(auth: SaslAuthenticator, token: str) -> int:
    assert auth.handshake("OAUTHBEARER")
    server = auth.expect_token()
    assert server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == b""
    return auth.complete(server)


@pytest.mark.parametrize(
    "max_reauth_ms, token_life_s, expected_ms",
    [(0, 600, 0), (3_600_000, 600, 600_000), (60_000, 600, 60_000)],
    ids=["reauth-off", "token-first", "session-first"],
)
def test_session_lifetime_is_capped_by_the_token(
    tmp_path, max_reauth_ms, token_life_s, expected_ms
):
    # the token's exp is whole seconds from the real clock: validate against NOW instead
    token = unsecured_token("alice", life_s=token_life_s, iat=int(NOW), exp=int(NOW) + token_life_s)
    validator = UnsecuredValidator(clock=lambda: NOW)
    auth = authenticator(tmp_path, max_reauth_ms, validator)
    assert login(auth, token) == expected_ms
    assert auth.state is AuthState.AUTHENTICATED and auth.principal == "User:alice"


def test_without_a_validator_oauthbearer_is_refused(tmp_path):
    auth = SaslAuthenticator(ScramCredentialStore(str(tmp_path)), ["OAUTHBEARER"])
    with pytest.raises(IllegalSaslStateError, match="without a token validator"):
        auth.handshake("OAUTHBEARER")
