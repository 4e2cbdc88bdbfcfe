"""The wire core's SASL states (AUTHENTICATING between NEGOTIATING and READY): bytes in,
events out. The broker is played by hand, with `security.scram.ScramServer` answering SCRAM
tokens, as in net/test_wire.py."""

from __future__ import annotations

import pytest

from client.net.test_wire import _api_versions_answer, _frame, _sent_requests
from onceflow.client.errors import (
    IllegalStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from onceflow.client.net.sasl import PlainClient, sasl_client
from onceflow.client.net.wire import VALID_PREVIOUS, WireConnection, WireState
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages import REQUESTS, RESPONSES
from onceflow.security.sasl import SaslAuthenticationError
from onceflow.security.scram import ScramMechanism, ScramServer, make_credential

SASL_VERSIONS = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (0, 12),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
}
AUTH = RESPONSES[ApiKey.SASL_AUTHENTICATE]


def _answer(header, response) -> bytes:
    version = header.request_api_version
    return _frame(header.correlation_id, response.encode(version), flexible_header=(
        type(response).is_flexible(version)
    ))  # fmt: skip


def _negotiated(sasl, versions=SASL_VERSIONS) -> tuple[WireConnection, list]:
    """A core past ApiVersions: AUTHENTICATING, with the SaslHandshake it sent."""
    wire = WireConnection("me", sasl)
    ((header, _),) = _sent_requests(wire)
    wire.receive_data(
        _api_versions_answer(header.correlation_id, header.request_api_version, versions)
    )
    assert wire.next_event() is None
    return wire, _sent_requests(wire)


def _handshaken(sasl) -> tuple[WireConnection, tuple]:
    """Past SaslHandshake: the first SaslAuthenticate (header, request)."""
    wire, ((header, request),) = _negotiated(sasl)
    assert (header.request_api_key, header.request_api_version) == (ApiKey.SASL_HANDSHAKE, 1)
    assert request.mechanism == sasl.mechanism
    mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    wire.receive_data(_answer(header, RESPONSES[ApiKey.SASL_HANDSHAKE](mechanisms=mechanisms)))
    assert wire.next_event() is None and wire.state is WireState.AUTHENTICATING
    (sent,) = _sent_requests(wire)
    assert sent[0].request_api_key == ApiKey.SASL_AUTHENTICATE
    assert sent[0].request_api_version == 2  # the highest both support
    return wire, sent


def test_table_puts_authenticating_between_negotiating_and_ready():
    assert VALID_PREVIOUS[WireState.AUTHENTICATING] == {WireState.NEGOTIATING}
    assert WireState.AUTHENTICATING in VALID_PREVIOUS[WireState.READY]
    assert WireState.AUTHENTICATING in VALID_PREVIOUS[WireState.CLOSED]


def test_without_sasl_api_versions_makes_it_ready():
    wire, sent = _negotiated(None)
    assert sent == [] and wire.state is WireState.READY


def test_plain_sends_one_token_and_an_empty_answer_makes_it_ready():
    wire, (header, request) = _handshaken(PlainClient("alice", "secret"))
    assert request.auth_bytes == b"\0alice\0secret"
    with pytest.raises(IllegalStateError):  # nothing but the handshake until READY
        wire.send_request(REQUESTS[ApiKey.METADATA](topics=[]))
    wire.receive_data(_answer(header, AUTH(auth_bytes=b"", session_lifetime_ms=0)))
    assert wire.next_event() is None
    assert wire.state is WireState.READY and not wire.handshaking
    assert wire.data_to_send() == []


@pytest.mark.parametrize("mechanism", list(ScramMechanism), ids=lambda m: m.mechanism_name)
def test_scram_runs_both_rounds_against_the_brokers_scram_server(mechanism):
    credential = make_credential(mechanism, "secret")
    server = ScramServer(mechanism, lambda user: credential if user == "alice" else None)
    wire, (header, request) = _handshaken(sasl_client(mechanism.mechanism_name, "alice", "secret"))
    for _ in range(2):  # client-first -> server-first; client-final -> server-final
        challenge = server.step(request.auth_bytes)
        wire.receive_data(_answer(header, AUTH(auth_bytes=challenge, session_lifetime_ms=0)))
        assert wire.next_event() is None
        if wire.state is WireState.READY:
            break
        ((header, request),) = _sent_requests(wire)
    assert server.is_complete and wire.state is WireState.READY
    assert wire.data_to_send() == []


def test_brokers_authentication_error_closes_with_its_message():
    wire, (header, _) = _handshaken(PlainClient("alice", "wrong"))
    message = "Authentication failed: Invalid username or password"
    wire.receive_data(
        _answer(
            header, AUTH(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message)
        )
    )
    with pytest.raises(SaslAuthenticationFailedError, match="Invalid username or password"):
        wire.next_event()
    assert wire.state is WireState.CLOSED


def test_a_forged_server_signature_fails_the_login():
    mechanism = ScramMechanism.SCRAM_SHA_256
    credential = make_credential(mechanism, "other password")  # the server is not who we think
    server = ScramServer(mechanism, lambda user: credential)
    wire, (header, request) = _handshaken(sasl_client("SCRAM-SHA-256", "alice", "secret"))
    wire.receive_data(_answer(header, AUTH(auth_bytes=server.step(request.auth_bytes))))
    assert wire.next_event() is None
    ((header, request),) = _sent_requests(wire)
    with pytest.raises(SaslAuthenticationError):
        server.step(request.auth_bytes)  # the proof does not match this credential
    forged = b"v=" + b"A" * 44
    wire.receive_data(_answer(header, AUTH(auth_bytes=forged)))
    with pytest.raises(SaslAuthenticationFailedError, match="server signature"):
        wire.next_event()
    assert wire.state is WireState.CLOSED


def test_mechanism_not_enabled_names_the_enabled_ones():
    wire, ((header, _),) = _negotiated(PlainClient("alice", "secret"))
    response = RESPONSES[ApiKey.SASL_HANDSHAKE](
        error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=["SCRAM-SHA-512"]
    )
    wire.receive_data(_answer(header, response))
    with pytest.raises(UnsupportedSaslMechanismError, match=r"PLAIN \(enabled: SCRAM-SHA-512\)"):
        wire.next_event()
    assert wire.state is WireState.CLOSED


def test_broker_without_sasl_handshake_v1_is_refused():
    versions = {**SASL_VERSIONS, ApiKey.SASL_HANDSHAKE: (0, 0)}
    wire = WireConnection("me", PlainClient("alice", "secret"))
    ((header, _),) = _sent_requests(wire)
    wire.receive_data(
        _api_versions_answer(header.correlation_id, header.request_api_version, versions)
    )
    with pytest.raises(UnsupportedVersionError, match="SaslHandshake v0"):
        wire.next_event()
    assert wire.state is WireState.CLOSED


def test_session_lifetime_is_kept():
    wire, (header, _) = _handshaken(PlainClient("alice", "secret"))
    wire.receive_data(_answer(header, AUTH(session_lifetime_ms=60_000)))
    assert wire.next_event() is None
    assert wire.ready and wire.session_lifetime_ms == 60_000


def test_secrets_stay_out_of_reprs():
    assert "secret" not in repr(PlainClient("alice", "secret"))
    assert "secret" not in repr(sasl_client("SCRAM-SHA-512", "alice", "secret"))
