"""SCRAM server and client: RFC 7677's test vector, round trips, and every refusal."""

from __future__ import annotations

import base64

import pytest

from onceflow.protocol.errors import ErrorCode
from onceflow.security.sasl import IllegalSaslStateError, SaslAuthenticationError
from onceflow.security.scram import (
    ScramClient,
    ScramClientState,
    ScramServer,
    ScramServerState,
    make_credential,
    password_matches,
)
from security.scram_helpers import (
    SHA256,
    SHA512,
    client_final_over,
    exchange,
    server_for,
    users,
)

GENERIC_512 = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism "
    "SCRAM-SHA-512"
)

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_server() -> ScramServer:
    credential = make_credential(SHA256, "pencil", 4096, RFC_SALT)
    return ScramServer(SHA256, {"user": credential}.get, server_nonce=RFC_SERVER_NONCE)


def test_rfc7677_vector_server_side():
    server = rfc_server()
    assert server.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.state is ScramServerState.EXPECTING_CLIENT_FINAL
    assert server.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.is_complete and server.authorization_id == "user"


def test_rfc7677_vector_client_side():
    client = ScramClient(SHA256, "user", "pencil", client_nonce=RFC_CLIENT_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.handle_server_first(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify_server_final(RFC_SERVER_FINAL)
    assert client.state is ScramClientState.COMPLETE


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
@pytest.mark.parametrize("username", ["alice", "a,b=c", "=2C", "ünï", "x" * 300])
def test_round_trip(mechanism, username):
    server = server_for(mechanism, users(mechanism, **{username: "s3cret"}))
    client = ScramClient(mechanism, username, "s3cret")
    exchange(server, client)
    assert server.authorization_id == username
    assert client.state is ScramClientState.COMPLETE


def test_authzid_equal_to_username_is_accepted():
    server = server_for(SHA512, users(SHA512, **{"a,b": "pw"}))
    exchange(server, ScramClient(SHA512, "a,b", "pw", authorization_id="a,b"))
    assert server.authorization_id == "a,b"


def test_authzid_other_than_username_is_refused_with_kafkas_message():
    server = server_for(SHA512, users(SHA512, alice="pw"))
    client = ScramClient(SHA512, "alice", "pw", authorization_id="admin")
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(client.first_message())
    assert info.value.client_message == (
        "Authentication failed: Client requested an authorization id that is different from "
        "username"
    )
    assert server.state is ScramServerState.FAILED


def failure_of(server: ScramServer, client: ScramClient) -> tuple[str, ErrorCode, str]:
    """(step that failed, error code, client message) of an exchange expected to fail."""
    server_first = server.step(client.first_message())
    client_final = client.handle_server_first(server_first)
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(client_final)
    assert server.state is ScramServerState.FAILED
    return "client-final", info.value.error_code, info.value.client_message


def test_wrong_password_and_unknown_user_fail_alike():
    credentials = users(SHA512, alice="right")
    wrong = failure_of(server_for(SHA512, credentials), ScramClient(SHA512, "alice", "wrong"))
    unknown = failure_of(server_for(SHA512, credentials), ScramClient(SHA512, "bob", "right"))
    assert wrong == unknown == ("client-final", ErrorCode.SASL_AUTHENTICATION_FAILED, GENERIC_512)


def test_unknown_user_sees_a_stable_salt_and_the_default_iterations():
    def server_first_for(name: str) -> bytes:
        server = server_for(SHA512, {})
        return server.step(ScramClient(SHA512, name, "pw", client_nonce="abc").first_message())

    first, again, other = (
        server_first_for("ghost"),
        server_first_for("ghost"),
        server_first_for("x"),
    )
    salt = first.split(b",")[1]
    assert salt == again.split(b",")[1] != other.split(b",")[1]
    assert len(base64.b64decode(salt[2:])) == 32 and first.endswith(b",i=4096")


def test_a_proof_for_a_nonce_the_server_did_not_issue_is_refused():
    """The client-final repeats the combined nonce. A client-final with another nonce is refused
    even when its proof is valid over what it says (replay protection)."""
    server = server_for(SHA512, users(SHA512, alice="pw"))
    server_first = server.step(b"n,,n=alice,r=cnonce")
    final = client_final_over(
        SHA512, "pw", "n=alice,r=cnonce", server_first, "c=biws,r=cnonce-mine"
    )
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(final)
    assert "nonce" in info.value.reason


def test_the_forging_helper_is_right():
    """The helper the two refusals around use is accepted when it repeats what it must."""
    server = server_for(SHA512, users(SHA512, alice="pw"))
    server_first = server.step(b"n,,n=alice,r=cnonce")
    nonce = server_first.split(b",")[0][2:].decode()
    server.step(
        client_final_over(SHA512, "pw", "n=alice,r=cnonce", server_first, f"c=biws,r={nonce}")
    )
    assert server.is_complete


def test_channel_binding_must_repeat_the_gs2_header():
    """A client-final whose c= is not base64 of the gs2 header sent ("n,,") is refused, even
    with a valid proof over it."""
    server = server_for(SHA512, users(SHA512, alice="pw"))
    server_first = server.step(b"n,,n=alice,r=cnonce")
    nonce = server_first.split(b",")[0][2:].decode()
    without = f"c={base64.b64encode(b'y,,').decode()},r={nonce}"
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(client_final_over(SHA512, "pw", "n=alice,r=cnonce", server_first, without))
    assert "channel binding" in info.value.reason


def test_a_proof_with_one_flipped_bit_is_refused():
    server = server_for(SHA512, users(SHA512, alice="pw"))
    client = ScramClient(SHA512, "alice", "pw")
    final = client.handle_server_first(server.step(client.first_message()))
    head, proof = final.rsplit(b",p=", 1)
    raw = bytearray(base64.b64decode(proof))
    raw[-1] ^= 1
    with pytest.raises(SaslAuthenticationError):
        server.step(head + b",p=" + base64.b64encode(bytes(raw)))


def test_credential_below_kafkas_minimum_iterations_is_refused():
    credential = make_credential(SHA512, "pw", iterations=4095)
    server = server_for(SHA512, {"alice": credential})
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(ScramClient(SHA512, "alice", "pw").first_message())
    assert info.value.client_message == GENERIC_512


def test_delegation_token_extension_is_refused_and_others_are_ignored():
    credentials = users(SHA512, alice="pw")
    with pytest.raises(SaslAuthenticationError):
        server_for(SHA512, credentials).step(b"n,,n=alice,r=abc,tokenauth=true")
    server = server_for(SHA512, credentials)
    assert server.step(b"n,,n=alice,r=abc,tokenauth=false,foo=bar").startswith(b"r=abc")


def test_lookup_failure_is_an_authentication_failure():
    def broken(name: str):
        raise OSError("disk gone")

    with pytest.raises(SaslAuthenticationError) as info:
        ScramServer(SHA512, broken).step(b"n,,n=alice,r=abc")
    assert info.value.client_message == GENERIC_512 and "disk gone" in info.value.reason


MALFORMED_CLIENT_FIRST = [
    b"",
    b"n,,",
    b"n,,n=alice",
    b"n,,n=alice,",
    b"n,,r=abc,n=alice",  # wrong order
    b"y,,n=alice,r=abc",  # channel binding flags
    b"p=tls-unique,,n=alice,r=abc",
    b"n,,m=ext,n=alice,r=abc",  # mandatory extension
    b"n,,n=,r=abc",
    b"n,,n=al=ice,r=abc",  # bad saslname escape
    b"n,,n=alice=2c,r=abc",  # lower-case escape
    b"n,,n=alice,r=",
    b"n,,n=alice,r=a b",  # nonce outside printable
    b"n,,n=alice,r=abc,",
    b"n,,n=alice,r=abc,x",
    b"n,,n=alice,r=abc,x=1,x=2",
    b"n,b=alice,n=alice,r=abc",
    b"n,,n=ali\xffce,r=abc",  # not UTF-8
    b"n,,n=ali\x00ce,r=abc",
    b"\x00\x01\x02",
]


@pytest.mark.parametrize("message", MALFORMED_CLIENT_FIRST)
def test_malformed_client_first_is_refused(message):
    server = server_for(SHA512, users(SHA512, alice="pw"))
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(message)
    assert info.value.client_message == GENERIC_512
    assert server.state is ScramServerState.FAILED


def valid_client_final() -> tuple[ScramServer, bytes]:
    server = server_for(SHA512, users(SHA512, alice="pw"))
    client = ScramClient(SHA512, "alice", "pw")
    return server, client.handle_server_first(server.step(client.first_message()))


def non_canonical(proof: bytes) -> bytes:
    """The same proof with unused bits set in the last base64 character ("XY==" -> "XZ==")."""
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    assert proof.endswith(b"==")  # 64 bytes of SHA-512
    last = alphabet.index(proof[-3])
    return proof[:-3] + bytes([alphabet[last | 1]]) + b"=="


def client_final_variants() -> list[bytes]:
    _, final = valid_client_final()
    channel, nonce, proof = final.split(b",")
    return [
        b"",
        final[:-1],  # truncated base64
        final[:20],
        channel + b"," + nonce,  # no proof
        nonce + b"," + channel + b"," + proof,  # wrong order
        channel + b"," + nonce + b"," + proof + b",x=1",
        channel + b"," + nonce + b",p=!!!!",
        channel + b"," + nonce + b",p=",
        channel + b"," + nonce + b",p=AAAA",  # proof of the wrong length
        b"c=!!," + nonce + b"," + proof,
        channel + b",r=," + proof,
        channel + b"," + nonce + b"," + non_canonical(proof),  # decodes to the same proof
        channel + b"," + nonce + b"," + proof.replace(b"p=", b"q="),
    ]


@pytest.mark.parametrize("index", range(len(client_final_variants())))
def test_malformed_client_final_is_refused(index):
    server, _ = valid_client_final()
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(client_final_variants()[index])
    assert info.value.client_message == GENERIC_512
    assert server.state is ScramServerState.FAILED


def test_a_token_after_completion_or_failure_is_an_illegal_state():
    server = server_for(SHA512, users(SHA512, alice="pw"))
    exchange(server, ScramClient(SHA512, "alice", "pw"))
    with pytest.raises(IllegalSaslStateError) as info:
        server.step(b"n,,n=alice,r=abc")
    assert info.value.error_code is ErrorCode.ILLEGAL_SASL_STATE
    assert server.state is ScramServerState.FAILED
    with pytest.raises(IllegalSaslStateError):
        server.step(b"anything")
    with pytest.raises(IllegalSaslStateError):
        server.authorization_id  # noqa: B018


def test_authorization_id_before_completion_is_an_illegal_state():
    server = server_for(SHA512, users(SHA512, alice="pw"))
    server.step(b"n,,n=alice,r=abc")
    with pytest.raises(IllegalSaslStateError):
        server.authorization_id  # noqa: B018


# -- the client's own checks ---------------------------------------------------------------


def client_after_first(nonce: str = "abc") -> ScramClient:
    client = ScramClient(SHA512, "alice", "pw", client_nonce=nonce)
    client.first_message()
    return client


@pytest.mark.parametrize(
    "server_first",
    [
        b"r=abc,s=c2FsdA==,i=4096",  # the server added no nonce
        b"r=xyzdef,s=c2FsdA==,i=4096",  # not starting with the client nonce
        b"r=abcdef,s=c2FsdA==,i=4095",  # below Kafka's minimum
        b"r=abcdef,s=c2FsdA==,i=99999999999",
        b"m=x,r=abcdef,s=c2FsdA==,i=4096",
        b"r=abcdef,s=c2FsdA=,i=4096",
        b"r=abcdef,i=4096,s=c2FsdA==",
        b"r=abcdef,s=c2FsdA==",
    ],
)
def test_client_refuses_a_bad_server_first(server_first):
    client = client_after_first()
    with pytest.raises(SaslAuthenticationError):
        client.handle_server_first(server_first)
    assert client.state is ScramClientState.FAILED


@pytest.mark.parametrize(
    "server_final", [b"e=invalid-proof", b"v=AAAA", b"v=", b"x=1", b"v=AAAA,,"]
)
def test_client_refuses_a_bad_server_final(server_final):
    client = client_after_first()
    client.handle_server_first(b"r=abcdef,s=c2FsdA==,i=4096")
    with pytest.raises(SaslAuthenticationError):
        client.verify_server_final(server_final)
    assert client.state is ScramClientState.FAILED


def test_client_calls_out_of_order_are_an_illegal_state():
    client = ScramClient(SHA512, "alice", "pw")
    with pytest.raises(IllegalSaslStateError):
        client.handle_server_first(b"r=x,s=c2FsdA==,i=4096")
    client.first_message()
    with pytest.raises(IllegalSaslStateError):
        client.first_message()


def test_password_matches():
    credential = make_credential(SHA256, "pencil")
    assert password_matches(SHA256, credential, "pencil")
    assert not password_matches(SHA256, credential, "pencil ")


def test_credential_repr_hides_keys():
    text = repr(make_credential(SHA512, "pw"))
    assert "iterations=4096" in text and "b'" not in text
