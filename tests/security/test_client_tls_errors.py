"""A TLS handshake that fails is an authentication error, raised at once by the onceflow
Producer, Consumer and AdminClient (as librdkafka and Kafka's Java client report it, Java as
`SslAuthenticationException`, an `AuthenticationException`), not a metadata timeout much later.

Cases: a CA that did not sign the broker's certificate (`ssl.ca.location`), over SSL and
SASL_SSL; a broker certificate for another name with endpoint identification on; a server
that refuses the client for want of a certificate with a TLS alert (TLS 1.3 reports it after
the client's side of the handshake). Every client waits far longer (max.block.ms,
request.timeout.ms, session and transaction timeouts) than the module's pytest timeout, so a
failure that only came from a timeout would hang the test or raise the wrong exception; no
test measures time."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import uuid

import pytest
from support.secure_broker import (
    confluent_config,
)

from onceflow.client.admin import AdminClient
from onceflow.client.consumer import Consumer
from onceflow.client.errors import (
    AuthenticationError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
)
from onceflow.client.producer import Producer

pytestmark = pytest.mark.timeout(60)

LONG_MS = 600_000  # far past the pytest timeout
PATIENT = {"max.block.ms": LONG_MS, "request.timeout.ms": LONG_MS}
UNTRUSTED = "(?i)certificate verify failed.*ssl.ca.location"


@pytest.fixture(params=[("SSL", None), ("SASL_SSL", "SCRAM-SHA-512")], ids=["SSL", "SASL_SSL"])
def wrong_ca(request, secure_broker, pki) -> dict:
    """Client settings trusting a CA that did not sign the broker's certificate."""
    listener, mechanism = request.param
    config = confluent_config(secure_broker, pki, listener, mechanism)
    return {**config, "ssl.ca.location": pki.path("other-ca.crt")}


def _topic() -> str:
    return f"tls-errors-{uuid.uuid4().hex[:8]}"


def poll_until_raises(consumer: Consumer) -> None:
    """Poll until poll() raises (the module's pytest timeout bounds it)."""
    while True:
        consumer.poll(1.0)


def test_the_error_is_an_authentication_error():
    assert issubclass(SslAuthenticationError, AuthenticationError)
    assert issubclass(SaslAuthenticationFailedError, AuthenticationError)
    assert not SslAuthenticationError("x").retriable


def test_producer_send_raises(wrong_ca):
    producer = Producer({**wrong_ca, **PATIENT, "message.timeout.ms": LONG_MS})
    try:
        with pytest.raises(SslAuthenticationError, match=UNTRUSTED):
            producer.send(_topic(), b"never")
    finally:
        producer.close(5)


def test_init_transactions_raises(wrong_ca):
    config = {**wrong_ca, **PATIENT, "transactional.id": _topic(), "transaction.timeout.ms": 60_000}
    producer = Producer(config)
    try:
        with pytest.raises(SslAuthenticationError, match=UNTRUSTED):
            producer.init_transactions()
    finally:
        producer.close(5)


def test_consumer_poll_raises(wrong_ca):
    consumer = Consumer({**wrong_ca, **PATIENT, "group.id": _topic(), "session.timeout.ms": 45_000})
    try:
        consumer.subscribe([_topic()])
        with pytest.raises(SslAuthenticationError, match=UNTRUSTED):
            poll_until_raises(consumer)
    finally:
        consumer.close()


def test_admin_raises(wrong_ca):
    with (
        pytest.raises(SslAuthenticationError, match=UNTRUSTED),
        AdminClient({**wrong_ca, "request.timeout.ms": LONG_MS}) as admin,
    ):
        admin.list_topics()


def test_a_certificate_for_another_name_is_refused_by_every_client(other_name_broker, pki):
    config = confluent_config(other_name_broker, pki, "SSL", None)
    wrong_name = "(?i)(hostname|IP address) mismatch.*does not name 127.0.0.1"
    with pytest.raises(SslAuthenticationError, match=wrong_name), AdminClient(config) as admin:
        admin.list_topics()
    producer = Producer({**config, **PATIENT})
    try:
        with pytest.raises(SslAuthenticationError, match=wrong_name):
            producer.send(_topic(), b"never")
    finally:
        producer.close(5)
    consumer = Consumer({**config, **PATIENT, "group.id": _topic()})
    try:
        consumer.assign([(_topic(), 0, 0)])
        with pytest.raises(SslAuthenticationError, match=wrong_name):
            poll_until_raises(consumer)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def alerting_server(pki):
    """A TLS server that requires a client certificate and, like Kafka's Java broker, sends the
    TLS alert and closes the connection a little later (Kafka's
    connection.failed.authentication.delay.ms): TLS 1.3 clients learn of the refusal on their
    first read. (onceflow's broker closes at once without an alert: its clients see a closed
    connection.)"""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_keystore)
    context.load_verify_locations(pki.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            # a failed wrap_socket closes its socket: a duplicate keeps the connection open
            with raw, raw.dup(), contextlib.suppress(OSError):
                try:
                    context.wrap_socket(raw, server_side=True)
                except ssl.SSLError:  # the alert is sent; Kafka closes after
                    stop.wait(0.5)  # connection.failed.authentication.delay.ms

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()
    thread.join(10)


def test_a_refused_client_certificate_is_an_authentication_error(alerting_server, pki):
    config = {
        "bootstrap.servers": alerting_server,
        "security.protocol": "SSL",
        "ssl.ca.location": pki.ca,
    }
    refused = "(?i)certificate required"
    with pytest.raises(SslAuthenticationError, match=refused), AdminClient(config) as admin:
        admin.list_topics()
    producer = Producer({**config, **PATIENT})
    try:
        with pytest.raises(SslAuthenticationError, match=refused):
            producer.send(_topic(), b"never")
    finally:
        producer.close(5)
