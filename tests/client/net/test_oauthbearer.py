"""The client side of SASL/OAUTHBEARER (client.net.oauthbearer): the initial response, the
answer to the broker's error JSON, the token providers (oauth_cb, "module:function", the
unsecured token) and the refresh at 80% of a token's lifetime; client_security's checks."""

from __future__ import annotations

import json

import pytest

from onceflow.client.errors import ConfigException
from onceflow.client.net.oauthbearer import (
    CallbackTokenProvider,
    OAuthBearerClient,
    OAuthBearerToken,
    RefreshingToken,
    UnsecuredTokenProvider,
    jwt_claims,
    oauth_callback,
    parse_extensions,
)
from onceflow.client.net.security import client_security
from onceflow.security.jwt import UnsecuredValidator
from onceflow.security.oauthbearer import parse_initial_response
from onceflow.security.sasl import SaslAuthenticationError


class FixedProvider:
    def __init__(self, *tokens: OAuthBearerToken):
        self.tokens = list(tokens)
        self.fetches = 0

    def fetch(self) -> OAuthBearerToken:
        self.fetches += 1
        return self.tokens.pop(0)


def test_initial_response_carries_the_token_and_extensions():
    token = OAuthBearerToken("abc", 2e9, extensions={"traceId": "7"})
    client = OAuthBearerClient(RefreshingToken(FixedProvider(token)))
    first = client.first_token()
    assert first == b"n,,\x01auth=Bearer abc\x01traceId=7\x01\x01"
    assert parse_initial_response(first) == ("abc", None, {"traceId": "7"})
    assert client.next_token(b"") is None  # the broker's empty answer completes it


def test_error_json_is_acknowledged_then_the_exchange_fails():
    client = OAuthBearerClient(RefreshingToken(FixedProvider(OAuthBearerToken("t", 2e9))))
    client.first_token()
    error = json.dumps({"status": "invalid_token"}).encode()
    assert client.next_token(error) == b"\x01"
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        client.next_token(b"")


def test_token_is_reused_until_80_percent_of_its_lifetime():
    now = [1000.0]
    provider = FixedProvider(
        OAuthBearerToken("one", 1100.0, issued_at=1000.0),
        OAuthBearerToken("two", 1200.0, issued_at=1079.0),
    )
    cache = RefreshingToken(provider, clock=lambda: now[0])
    assert cache.current().value == "one"
    now[0] = 1079.0
    assert cache.current().value == "one" and provider.fetches == 1
    now[0] = 1080.0
    assert cache.current().value == "two" and provider.fetches == 2


def test_an_expired_token_from_the_provider_is_an_error():
    provider = FixedProvider(OAuthBearerToken("old", 900.0, issued_at=800.0))
    with pytest.raises(SaslAuthenticationError, match="expired"):
        RefreshingToken(provider, clock=lambda: 1000.0).current()


def test_oauth_cb_results():
    token = CallbackTokenProvider(lambda cfg: ("tok", 2e9, "alice", {"a": "b"}), "cfg").fetch()
    assert (token.value, token.expires_at, token.principal) == ("tok", 2e9, "alice")
    assert token.extensions == {"a": "b"}
    with pytest.raises(SaslAuthenticationError, match="must return"):
        CallbackTokenProvider(lambda cfg: "tok").fetch()
    with pytest.raises(SaslAuthenticationError, match="oauth_cb failed"):
        CallbackTokenProvider(lambda cfg: 1 / 0).fetch()


def test_oauth_callback_by_name():
    assert oauth_callback("json:dumps") is json.dumps
    with pytest.raises(ValueError):
        oauth_callback("json.dumps")


def test_unsecured_token_validates_as_kafkas_unsecured_validator_wants():
    provider = UnsecuredTokenProvider("principal=alice scope=a,b lifeSeconds=60 extension_x=1")
    token = provider.fetch()
    claims = jwt_claims(token.value)
    assert claims is not None and claims["sub"] == "alice" and claims["scope"] == ["a", "b"]
    assert claims["exp"] - claims["iat"] == 60
    assert token.extensions == {"x": "1"}
    validated = UnsecuredValidator(required_scope=["a"]).validate(token.value)
    assert validated.principal == "alice"
    with pytest.raises(ValueError, match="principal"):
        UnsecuredTokenProvider("scope=a")


def test_extensions_parsing():
    assert parse_extensions("a=1, b=2") == {"a": "1", "b": "2"}
    with pytest.raises(ValueError, match="reserved"):
        parse_extensions("auth=x")


BASE = {"security.protocol": "sasl_plaintext", "sasl.mechanism": "OAUTHBEARER"}


@pytest.mark.parametrize(
    "settings, message",
    [
        ({}, "token provider"),
        ({"sasl.oauthbearer.method": "oidc"}, "sasl.oauthbearer.token.endpoint.url"),
        ({"sasl.oauthbearer.method": "jwt-bearer"}, "default, oidc"),
        ({"oauth_cb": "no.such.module:f"}, "oauth_cb"),
        ({"oauth_cb": 42}, "callable"),
        ({"enable.sasl.oauthbearer.unsecure.jwt": "true"}, "principal"),
    ],
)
def test_config_errors(settings, message):
    with pytest.raises(ConfigException, match=message):
        client_security({**BASE, **settings})


def test_secret_stays_out_of_repr():
    security = client_security(
        {
            **BASE,
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:1/token",
            "sasl.oauthbearer.client.id": "svc",
            "sasl.oauthbearer.client.secret": "s3cr3t",
        }
    )
    assert security.mechanism == "OAUTHBEARER"
    assert "s3cr3t" not in repr(security) + repr(security.sasl()) + repr(security.token)
