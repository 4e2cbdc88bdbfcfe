"""SASL login through an in-process broker on SASL_PLAINTEXT and SASL_SSL listeners: SCRAM-SHA-256,
SCRAM-SHA-512 and PLAIN against bootstrap users; the pre-authentication gate (only ApiVersions,
SaslHandshake, SaslAuthenticate; frames capped at sasl.server.max.receive.size); failed logins
(answered after connection.failed.authentication.delay.ms, one log line without the password,
closed); bad input (fuzzed tokens, truncated exchanges) with the broker serving on; KIP-368
session lifetime."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import struct
import time

import pytest
from support.pki import tls_broker_config

from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.api_versions import ApiVersionsRequest
from onceflow.protocol.messages.metadata import MetadataRequest
from onceflow.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from onceflow.protocol.messages.sasl_handshake import SaslHandshakeRequest
from onceflow.security.scram import ScramClient, ScramMechanism
from security.live import RawClient, client_tls, connections_of, running_broker

pytestmark = pytest.mark.timeout(60)

PASSWORD = "admin-secret-Ω"
BOOTSTRAP = (
    f"SCRAM-SHA-512=[name=admin,password={PASSWORD}];SCRAM-SHA-256=[name=admin,password={PASSWORD}]"
)
SASL_CONFIG = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
    "onceflow.sasl.bootstrap.users": BOOTSTRAP,
    "connection.failed.authentication.delay.ms": 300,
}


async def handshake(client: RawClient, mechanism: str):
    return await client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))


async def authenticate(client: RawClient, token: bytes, version: int = 2):
    return await client.request(
        ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateRequest(auth_bytes=token)
    )


async def login(client: RawClient, mechanism: str, user: str, password: str, version: int = 2):
    """The whole exchange; returns the last SaslAuthenticate response."""
    assert (await handshake(client, mechanism)).error_code == ErrorCode.NONE
    if mechanism == "PLAIN":
        return await authenticate(client, f"\0{user}\0{password}".encode(), version)
    scram = ScramClient(ScramMechanism.from_mechanism_name(mechanism), user, password)
    first = await authenticate(client, scram.first_message(), version)
    if first.error_code != ErrorCode.NONE:
        return first
    final = await authenticate(client, scram.handle_server_first(first.auth_bytes), version)
    if final.error_code == ErrorCode.NONE:
        scram.verify_server_final(final.auth_bytes)
    return final


@pytest.fixture(scope="module")
def module_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sasl")


def run(scenario, tmp_path, pki, **extra):
    async def main():
        config = {**SASL_CONFIG, **tls_broker_config(pki, "none"), **extra}
        async with running_broker(tmp_path / "data", **config) as broker:
            await scenario(broker)

    asyncio.run(main())


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_login_sets_the_principal_and_opens_the_connection(tmp_path, pki, listener, mechanism):
    async def scenario(broker):
        tls = client_tls(pki) if listener == "SASL_SSL" else None
        client = await RawClient.connect(broker.bound_listeners[listener], tls)
        assert (await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0
        response = await login(client, mechanism, "admin", PASSWORD)
        assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
        (connection,) = connections_of(broker, listener)
        assert connection.ctx.principal == "User:admin"
        metadata = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        assert metadata.brokers[0].port == broker.bound_listeners[listener].port
        # a second SaslAuthenticate is refused, the connection stays
        again = await authenticate(client, b"x")
        assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert (await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0
        await client.close()

    run(scenario, tmp_path, pki)


@pytest.mark.parametrize(
    ("mechanism", "user", "expected"),
    [
        ("SCRAM-SHA-512", "admin", "invalid credentials with SASL mechanism SCRAM-SHA-512"),
        ("SCRAM-SHA-256", "nobody", "invalid credentials with SASL mechanism SCRAM-SHA-256"),
        ("PLAIN", "admin", "Invalid username or password"),
    ],
)
def test_failed_login_is_delayed_logged_once_without_password_and_closed(
    tmp_path, pki, caplog, mechanism, user, expected
):
    wrong = "wrong-Pa55word"

    async def scenario(broker):
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        started = time.monotonic()
        response = await login(client, mechanism, user, wrong)
        assert time.monotonic() - started >= 0.3
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert expected in response.error_message
        assert await client.closed_by_peer()
        # another client logs in meanwhile
        other = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        assert (await login(other, mechanism, "admin", PASSWORD)).error_code == ErrorCode.NONE
        await other.close()

    with caplog.at_level(logging.INFO, logger="onceflow.broker"):
        run(scenario, tmp_path, pki)
    failures = [r.getMessage() for r in caplog.records if "failed authentication" in r.getMessage()]
    assert len(failures) == 1, failures
    assert "127.0.0.1:" in failures[0] and mechanism in failures[0]
    assert not any(wrong in r.getMessage() or PASSWORD in r.getMessage() for r in caplog.records)


def test_unsupported_mechanism_is_answered_with_the_enabled_list_then_closed(tmp_path, pki):
    async def scenario(broker):
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        response = await handshake(client, "GSSAPI")
        assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert response.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
        assert await client.closed_by_peer()

    run(scenario, tmp_path, pki, **{"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512"})


@pytest.mark.parametrize(
    "before",
    [
        [],  # straight to Metadata
        [("handshake", "PLAIN")],  # Metadata instead of the token
    ],
)
def test_requests_before_authentication_close_the_connection(tmp_path, pki, caplog, before):
    async def scenario(broker):
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        for _, mechanism in before:
            await handshake(client, mechanism)
        await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        assert await client.closed_by_peer()

    with caplog.at_level(logging.WARNING, logger="onceflow.broker"):
        run(scenario, tmp_path, pki)
    refusals = [r.getMessage() for r in caplog.records if "unexpected METADATA" in r.getMessage()]
    assert len(refusals) == 1


def test_oversized_frame_before_authentication_is_closed_but_not_after(tmp_path, pki, caplog):
    big = 600 * 1024  # over sasl.server.max.receive.size (512 KiB), under socket.request.max

    async def scenario(broker):
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        client.writer.write(struct.pack(">i", big) + b"\0" * 64)
        assert await client.closed_by_peer()
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        assert (await login(client, "PLAIN", "admin", PASSWORD)).error_code == ErrorCode.NONE
        await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        padded = SaslAuthenticateRequest(auth_bytes=b"\0" * big)  # large, valid, refused politely
        assert (await client.receive(ApiKey.METADATA, 12)).brokers
        response = await client.request(ApiKey.SASL_AUTHENTICATE, 2, padded)
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        await client.close()

    with caplog.at_level(logging.WARNING, logger="onceflow.broker"):
        run(scenario, tmp_path, pki)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("exceeds sasl.server.max.receive.size=524288" in m for m in messages) == 1


def test_fuzzed_and_truncated_exchanges_never_take_the_broker_down(tmp_path, pki):
    rng = random.Random(10)
    tokens = [b"", b"\0", b"\0\0", b"n,,", b"n,,n=admin,r=", b"p=,c=biws", os.urandom(300)]
    tokens += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200))) for _ in range(20)]

    async def scenario(broker):
        address = broker.bound_listeners["SASL_PLAINTEXT"]
        for index, token in enumerate(tokens):
            mechanism = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")[index % 3]
            client = await RawClient.connect(address)
            await handshake(client, mechanism)
            response = await authenticate(client, token)
            if mechanism != "PLAIN" and response.error_code == ErrorCode.NONE:
                # a well-formed client-first: the final is garbage
                response = await authenticate(client, token[::-1])
            assert response.error_code in (
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                ErrorCode.ILLEGAL_SASL_STATE,
            )
            assert await client.closed_by_peer()
        # truncated: a client-first, then the client goes away
        scram = ScramClient(ScramMechanism.SCRAM_SHA_256, "admin", PASSWORD)
        client = await RawClient.connect(address)
        await handshake(client, "SCRAM-SHA-256")
        await authenticate(client, scram.first_message())
        await client.close()
        # half a frame, then the client goes away
        client = await RawClient.connect(address)
        client.writer.write(struct.pack(">i", 100) + b"\0\x11")
        await client.close()
        client = await RawClient.connect(address)
        assert (await login(client, "SCRAM-SHA-512", "admin", PASSWORD)).error_code == 0
        await client.close()

    run(scenario, tmp_path, pki, **{"connection.failed.authentication.delay.ms": 0})


def test_sasl_requests_on_a_plaintext_listener_get_illegal_sasl_state(tmp_path, pki):
    async def scenario(broker):
        client = await RawClient.connect(broker.bound_listeners["PLAINTEXT"])
        assert (await handshake(client, "PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert (await authenticate(client, b"x")).error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert (await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0
        await client.close()

    run(scenario, tmp_path, pki)


def test_bootstrap_users_are_stored_once_and_survive_restart(tmp_path, pki):
    async def first(broker):
        assert set(broker.state.credentials.users()["admin"]) == set(ScramMechanism)

    run(first, tmp_path, pki)
    before = (tmp_path / "data" / "scram-credentials.json").read_bytes()

    async def second(broker):
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        assert (await login(client, "SCRAM-SHA-256", "admin", PASSWORD)).error_code == 0
        await client.close()

    run(second, tmp_path, pki)
    assert (tmp_path / "data" / "scram-credentials.json").read_bytes() == before


@pytest.mark.parametrize("version", [1, 2])
def test_session_lifetime_and_expiry_kip_368(tmp_path, pki, caplog, version):
    async def scenario(broker):
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        response = await login(client, "SCRAM-SHA-512", "admin", PASSWORD, version)
        assert response.session_lifetime_ms == 1000
        # re-authentication before expiry keeps the connection and renews the session
        assert (await login(client, "PLAIN", "admin", PASSWORD, version)).error_code == 0
        await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        await asyncio.sleep(1.1)
        await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        assert await client.closed_by_peer()

    with caplog.at_level(logging.WARNING, logger="onceflow.broker"):
        run(scenario, tmp_path, pki, **{"connections.max.reauth.ms": 1000})
    assert any("session expired" in r.getMessage() for r in caplog.records)


def test_sasl_handshake_v0_is_refused_and_closed(tmp_path, pki):
    async def scenario(broker):
        client = await RawClient.connect(broker.bound_listeners["SASL_PLAINTEXT"])
        response = await client.request(
            ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN")
        )
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert await client.closed_by_peer()

    run(scenario, tmp_path, pki)
