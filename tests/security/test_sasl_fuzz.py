"""Hypothesis: whatever bytes a client sends, the SCRAM and PLAIN servers answer with a token or
a `SaslAuthenticationError`, never another exception, and end FAILED after an error."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.security.plain import PlainServer, PlainServerState
from onceflow.security.sasl import SaslAuthenticationError
from onceflow.security.scram import ScramClient, ScramServer, ScramServerState
from security.scram_helpers import SHA512, users

CREDENTIALS = users(SHA512, alice="pw")
# Tokens built from SCRAM's own punctuation and attribute letters reach deeper than random bytes.
SCRAMMY = st.lists(
    st.sampled_from(
        [
            "n",
            "y",
            "p",
            "a=",
            "n=",
            "r=",
            "c=",
            "p=",
            "m=",
            "s=",
            "i=",
            ",",
            "=",
            "=2C",
            "=3D",
            "alice",
            "biws",
            "AAAA",
            "==",
            "\x00",
            "\xff",
            "tokenauth",
            "4096",
        ]
    ),
    max_size=20,
).map(lambda parts: "".join(parts).encode("utf-8", "surrogateescape"))
TOKENS = st.one_of(st.binary(max_size=300), SCRAMMY)
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def step_or_refuse(server, token: bytes) -> bool:
    try:
        server.step(token)
    except SaslAuthenticationError:
        return False
    return True


@FUZZ
@given(first=TOKENS, second=TOKENS, third=TOKENS)
def test_scram_server_first_step(first, second, third):
    server = ScramServer(SHA512, CREDENTIALS.get)
    for token in (first, second, third):
        if not step_or_refuse(server, token):
            assert server.state is ScramServerState.FAILED
            break


@FUZZ
@given(token=TOKENS, cut=st.integers(min_value=0, max_value=200), flip=st.integers(0, 255))
def test_scram_server_final_step(token, cut, flip):
    """After a valid client-first: random finals, and a valid final truncated or with one byte
    changed."""
    for final in (token, None):
        server = ScramServer(SHA512, CREDENTIALS.get)
        client = ScramClient(SHA512, "alice", "pw")
        valid = client.handle_server_first(server.step(client.first_message()))
        if final is None:
            mutated = bytearray(valid[: len(valid) - cut % len(valid)])
            if mutated:
                mutated[flip % len(mutated)] ^= 1 + flip % 255
            final = bytes(mutated)
        accepted = step_or_refuse(server, final)
        assert accepted == (final == valid)
        assert server.state is (ScramServerState.COMPLETE if accepted else ScramServerState.FAILED)


@FUZZ
@given(token=st.one_of(st.binary(max_size=100), st.text(max_size=40).map(str.encode)))
def test_plain_server(token):
    server = PlainServer(lambda user, password: (user, password) == ("alice", "pw"))
    accepted = step_or_refuse(server, token)
    assert accepted == (token in (b"\x00alice\x00pw", b"alice\x00alice\x00pw"))
    assert server.state is (PlainServerState.COMPLETE if accepted else PlainServerState.FAILED)
