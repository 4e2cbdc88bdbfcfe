"""SASL PLAIN: Kafka's answers, checked against SCRAM credentials in the store."""

from __future__ import annotations

import pytest

from onceflow.protocol.errors import ErrorCode
from onceflow.security.credentials import ScramCredentialStore
from onceflow.security.plain import PlainServer, PlainServerState
from onceflow.security.sasl import IllegalSaslStateError, SaslAuthenticationError
from onceflow.security.scram import make_credential
from security.scram_helpers import SHA256, SHA512

GENERIC = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism "
    "PLAIN"
)
INVALID = "Authentication failed: Invalid username or password"


@pytest.fixture
def store(tmp_path) -> ScramCredentialStore:
    store = ScramCredentialStore(str(tmp_path))
    store.add_if_absent("alice", SHA512, make_credential(SHA512, "alice-pw"))
    store.add_if_absent("bob", SHA256, make_credential(SHA256, "bob-pw"))  # SHA-256 only
    return store


@pytest.mark.parametrize(
    "token, user",
    [
        (b"\x00alice\x00alice-pw", "alice"),
        (b"alice\x00alice\x00alice-pw", "alice"),
        (b"\x00bob\x00bob-pw", "bob"),
    ],
)
def test_good_credentials(store, token, user):
    server = PlainServer(store.verify_password)
    assert server.step(token) == b""
    assert server.is_complete and server.authorization_id == user


@pytest.mark.parametrize(
    "token, message",
    [
        (b"\x00alice\x00wrong", INVALID),
        (b"\x00nobody\x00alice-pw", INVALID),  # same text as a wrong password
        (b"\x00ALICE\x00alice-pw", INVALID),
        (
            b"bob\x00alice\x00alice-pw",
            "Authentication failed: Client requested an authorization "
            "id that is different from username",
        ),
        (b"\x00\x00alice-pw", GENERIC),  # empty user name
        (b"\x00alice\x00", GENERIC),  # empty password
        (b"alice\x00alice-pw", GENERIC),  # one NUL
        (b"\x00alice\x00alice-pw\x00", GENERIC),  # Kafka would ignore the tail
        (b"", GENERIC),
        (b"\x00al\xffice\x00pw", GENERIC),  # not UTF-8
    ],
)
def test_refusals(store, token, message):
    server = PlainServer(store.verify_password)
    with pytest.raises(SaslAuthenticationError) as info:
        server.step(token)
    assert info.value.client_message == message
    assert info.value.error_code is ErrorCode.SASL_AUTHENTICATION_FAILED
    assert server.state is PlainServerState.FAILED


def test_a_second_token_is_an_illegal_state(store):
    server = PlainServer(store.verify_password)
    server.step(b"\x00alice\x00alice-pw")
    with pytest.raises(IllegalSaslStateError):
        server.step(b"\x00alice\x00alice-pw")


def test_a_failing_check_is_an_authentication_failure():
    def broken(user: str, password: str) -> bool:
        raise OSError("disk gone")

    with pytest.raises(SaslAuthenticationError) as info:
        PlainServer(broken).step(b"\x00alice\x00pw")
    assert "disk gone" in info.value.reason and "disk gone" not in info.value.client_message


def test_plain_prefers_the_sha512_credential(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.add_if_absent("carol", SHA256, make_credential(SHA256, "old"))
    store.add_if_absent("carol", SHA512, make_credential(SHA512, "new"))
    assert store.verify_password("carol", "new") and not store.verify_password("carol", "old")
