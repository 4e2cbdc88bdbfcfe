"""Independent SCRAM clients against our server: kafka-python's `ScramClient` and aiokafka's
`ScramAuthenticator` (each its own implementation of RFC 5802, used by real Kafka clients)."""

from __future__ import annotations

import pytest
from aiokafka.conn import ScramAuthenticator
from kafka.net.sasl.scram import ScramClient as KafkaPythonScramClient

from onceflow.security.sasl import SaslAuthenticationError
from onceflow.security.scram import ScramServerState
from security.scram_helpers import SHA256, SHA512, server_for, users

MECHANISMS = [SHA256, SHA512]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_client(mechanism):
    server = server_for(mechanism, users(mechanism, alice="alice-secret"))
    client = KafkaPythonScramClient("alice", "alice-secret", mechanism.mechanism_name)
    client.process_server_first_message(server.step(client.first_message()))
    server_final = server.step(client.final_message())
    client.process_server_final_message(server_final)  # raises on a wrong server signature
    assert server.authorization_id == "alice"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_client_with_a_wrong_password(mechanism):
    server = server_for(mechanism, users(mechanism, alice="alice-secret"))
    client = KafkaPythonScramClient("alice", "guess", mechanism.mechanism_name)
    client.process_server_first_message(server.step(client.first_message()))
    with pytest.raises(SaslAuthenticationError):
        server.step(client.final_message())
    assert server.state is ScramServerState.FAILED


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("username", ["bob", "a,b=c"])  # aiokafka escapes "," and "="
def test_aiokafka_client(mechanism, username):
    server = server_for(mechanism, users(mechanism, **{username: "pässword"}))
    client = ScramAuthenticator(
        loop=None,
        sasl_plain_username=username,
        sasl_plain_password="pässword",
        sasl_mechanism=mechanism.mechanism_name,
    )
    server_first = server.step(client.first_message().encode())
    client.process_server_first_message(server_first.decode())
    server_final = server.step(client.final_message().encode())
    client.process_server_final_message(server_final.decode())
    assert server.authorization_id == username
