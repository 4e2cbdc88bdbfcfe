"""The broker's JWT validators (security.jwt) and the OAUTHBEARER server (security.oauthbearer):
unsecured tokens as Kafka's unsecured validator checks them, RS256 tokens against a JWKS file
from the local test issuer, and the server's answers (empty on success, the invalid_token JSON,
then the failure after the client's \\x01)."""

from __future__ import annotations

import base64
import json
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from support.oidc_issuer import AUDIENCE, ISSUER, OidcIssuer, b64url, unsecured_token

from onceflow.security.jwt import InvalidTokenError, JwksValidator, UnsecuredValidator
from onceflow.security.oauthbearer import (
    INVALID_TOKEN,
    OAuthBearerServer,
    OAuthBearerServerState,
    parse_initial_response,
)
from onceflow.security.sasl import IllegalSaslStateError, SaslAuthenticationError


@pytest.fixture(scope="module")
def issuer(tmp_path_factory):
    return OidcIssuer(tmp_path_factory.mktemp("issuer"))


def jwks(issuer, **options) -> JwksValidator:
    return JwksValidator(issuer.jwks_url, [AUDIENCE], ISSUER, **options)


def test_unsecured_token_grants_its_sub_and_scope():
    token = UnsecuredValidator().validate(unsecured_token("alice", scope=["read", "write"]))
    assert token.principal == "alice"
    assert token.scope == {"read", "write"}


@pytest.mark.parametrize(
    "token, reason",
    [
        (unsecured_token("alice", life_s=-60), "expired"),
        (unsecured_token(""), "no sub claim"),
        (unsecured_token("alice", scope=["read"]), "required scope"),
        ("not.a-token", "three dot-separated"),
        ("e30.e30.c2ln", "alg none"),  # {} header, {} claims, a signature
    ],
    ids=["expired", "no-sub", "missing-scope", "not-jws", "signed"],
)
def test_unsecured_validator_rejects(token, reason):
    with pytest.raises(InvalidTokenError, match=reason):
        UnsecuredValidator(required_scope=["write"] if reason == "required scope" else ()).validate(
            token
        )


def test_clock_skew_accepts_a_just_expired_token():
    token = unsecured_token("alice", life_s=-5)
    assert UnsecuredValidator(clock_skew_s=30).validate(token).principal == "alice"
    with pytest.raises(InvalidTokenError, match="expired"):
        UnsecuredValidator(clock_skew_s=0).validate(token)


def test_signed_token_validates_against_the_jwks_file(issuer):
    validated = jwks(issuer).validate(issuer.mint("svc-spark", scope="kafka"))
    assert validated.principal == "svc-spark"
    assert validated.scope == {"kafka"}
    assert validated.expires_at > time.time()


def test_sub_claim_name_picks_the_principal(issuer):
    token = issuer.mint("ignored", client_id="svc-batch")
    assert jwks(issuer, principal_claim="client_id").validate(token).principal == "svc-batch"


@pytest.mark.parametrize(
    "claims, reason",
    [
        ({"aud": "other"}, "not an expected audience"),
        ({"iss": "https://evil.test"}, "iss"),
        ({"life_s": -120}, "expired"),
        ({"nbf_in_s": 600}, "nbf"),
    ],
    ids=["audience", "issuer", "expired", "not-yet-valid"],
)
def test_signed_validator_rejects_claims(issuer, claims, reason):
    claims = dict(claims)
    life_s = claims.pop("life_s", None)
    if "nbf_in_s" in claims:  # from now, not from collection time (a long run passes it)
        claims["nbf"] = int(time.time()) + claims.pop("nbf_in_s")
    with pytest.raises(InvalidTokenError, match=reason):
        jwks(issuer).validate(issuer.mint("alice", life_s=life_s, **claims))


def test_signed_validator_rejects_another_key_and_unsecured_tokens(issuer):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(InvalidTokenError, match="signature does not verify"):
        jwks(issuer).validate(issuer.mint("alice", key=other))
    with pytest.raises(InvalidTokenError, match="unsupported or missing alg"):
        jwks(issuer).validate(unsecured_token("alice", iss=ISSUER, aud=AUDIENCE))
    token = issuer.mint("alice")
    header, body, signature = token.split(".")
    forged = json.loads(_decode(body)) | {"sub": "admin"}
    with pytest.raises(InvalidTokenError, match="signature does not verify"):
        jwks(issuer).validate(f"{header}.{b64url(json.dumps(forged).encode())}.{signature}")


def _decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_initial_response_parsing():
    token, authzid, extensions = parse_initial_response(
        b"n,a=alice,\x01auth=Bearer abc.def.\x01traceId=42\x01\x01"
    )
    assert (token, authzid, extensions) == ("abc.def.", "alice", {"traceId": "42"})
    bad_responses = (
        b"y,,\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer t\x01",
        b"n,,\x01x=1\x01\x01",
    )
    for bad in bad_responses:
        with pytest.raises(ValueError):
            parse_initial_response(bad)


def test_server_completes_with_the_token_principal():
    server = OAuthBearerServer(UnsecuredValidator())
    token = unsecured_token("alice")
    assert server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == b""
    assert server.is_complete and server.authorization_id == "alice"
    assert server.token_expires_at is not None


def test_server_answers_invalid_token_then_fails_after_the_clients_ack():
    server = OAuthBearerServer(UnsecuredValidator())
    token = unsecured_token("alice", life_s=-3600)
    answer = server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    assert json.loads(answer) == {"status": "invalid_token"}
    assert server.state is OAuthBearerServerState.ERROR_SENT and not server.is_complete
    with pytest.raises(SaslAuthenticationError) as failure:
        server.step(b"\x01")
    assert failure.value.client_message == INVALID_TOKEN
    assert "expired" in failure.value.reason
    with pytest.raises(IllegalSaslStateError):
        server.step(b"\x01")


def test_server_refuses_an_authzid_other_than_the_principal():
    server = OAuthBearerServer(UnsecuredValidator())
    token = unsecured_token("alice")
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        server.step(f"n,a=admin,\x01auth=Bearer {token}\x01\x01".encode())
    assert server.state is OAuthBearerServerState.FAILED


def test_jwks_over_http_and_an_es256_key(tmp_path):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    with OidcIssuer(tmp_path) as issuer:  # serves the JWKS at /jwks too
        validator = JwksValidator(f"{issuer.base_url}/jwks", [AUDIENCE], ISSUER)
        assert validator.validate(issuer.mint("alice")).principal == "alice"
    # an EC P-256 key in a JWKS file; ES256 signatures are r || s, 32 bytes each
    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    jwk = {"kty": "EC", "crv": "P-256", "kid": "ec1", "use": "sig"}
    jwk |= {"x": b64url(numbers.x.to_bytes(32, "big")), "y": b64url(numbers.y.to_bytes(32, "big"))}
    (tmp_path / "ec.json").write_text(json.dumps({"keys": [jwk]}))
    header = b64url(json.dumps({"alg": "ES256", "kid": "ec1"}).encode())
    claims = {"sub": "bob", "exp": int(time.time()) + 60}
    signing_input = f"{header}.{b64url(json.dumps(claims).encode())}"
    r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    token = f"{signing_input}.{b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"
    assert JwksValidator((tmp_path / "ec.json").as_uri()).validate(token).principal == "bob"
    with pytest.raises(InvalidTokenError, match="signature does not verify"):
        JwksValidator((tmp_path / "ec.json").as_uri()).validate(token[:-4] + "AAAA")
