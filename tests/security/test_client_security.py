"""onceflow's own Producer, Consumer and AdminClient over TLS and SASL against one broker
process, with confluent-kafka's property names: SASL_SSL with SCRAM-SHA-512 and PLAIN,
SASL_PLAINTEXT with SCRAM-SHA-256, SSL with mutual TLS; a wrong password fails fast with
SASL_AUTHENTICATION_FAILED while the broker serves others; a broker certificate for another
name is accepted with `ssl.endpoint.identification.algorithm=none` (the TLS failures themselves
are tests/security/test_client_tls_errors.py).

The cases mirror tests/interop/test_security_clients.py (the same broker listeners and users)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest
from support.broker import BrokerProcess
from support.client_round_trip import round_trip as client_round_trip
from support.secure_broker import (
    CASE_IDS,
    CASES,
    PASSWORD,
    USER,
    listener_ports,
)
from support.secure_broker import confluent_config as client_config

from onceflow.cli.main import main
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.consumer import Consumer
from onceflow.client.errors import (
    ConfigException,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from onceflow.client.producer import Producer

pytestmark = pytest.mark.timeout(120)

RECORDS = [b"record-%d" % i for i in range(5)]


def _topic() -> str:
    return f"client-secure-{uuid.uuid4().hex[:8]}"


def round_trip(config: dict) -> list[bytes]:
    return client_round_trip(config, _topic(), RECORDS)


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=CASE_IDS)
def test_producer_consumer_round_trip(secure_broker, pki, listener, mechanism):
    assert round_trip(client_config(secure_broker, pki, listener, mechanism)) == RECORDS


def test_admin_client_over_sasl_ssl(secure_broker, pki):
    topic = _topic()
    with AdminClient(client_config(secure_broker, pki, "SASL_SSL", "SCRAM-SHA-512")) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
        assert topic in admin.list_topics()


def test_admin_wrong_password_is_sasl_authentication_failed(secure_broker, pki):
    config = client_config(secure_broker, pki, "SASL_SSL", "SCRAM-SHA-512", "wrong")
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as failure, AdminClient(config) as admin:
        admin.list_topics()
    assert time.monotonic() - started < 10
    assert "invalid credentials" in str(failure.value)  # the broker's message
    assert "wrong" not in str(failure.value)


def test_producer_wrong_password_raises_and_broker_keeps_serving(secure_broker, pki):
    config = client_config(secure_broker, pki, "SASL_SSL", "PLAIN", "wrong")
    producer = Producer({**config, "max.block.ms": 30_000})
    started = time.monotonic()
    try:
        with pytest.raises(SaslAuthenticationFailedError):
            producer.send(_topic(), b"never")
    finally:
        producer.close()
    assert time.monotonic() - started < 10
    consumer = Consumer(client_config(secure_broker, pki, "SASL_PLAINTEXT", "SCRAM-SHA-256", "x"))
    try:
        consumer.assign([(_topic(), 0, 0)])
        with pytest.raises(SaslAuthenticationFailedError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                consumer.poll(1.0)
    finally:
        consumer.close()
    assert round_trip(client_config(secure_broker, pki, "SASL_SSL", "PLAIN")) == RECORDS


def test_mechanism_the_broker_does_not_enable(tmp_path_factory, pki):
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "onceflow.sasl.bootstrap.users": f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]",
    }
    with BrokerProcess(tmp_path_factory.mktemp("scram-only") / "data", config) as broker:
        broker.listener_port = listener_ports(broker)
        client = client_config(broker, pki, "SASL_PLAINTEXT", "PLAIN")
        with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-512"):
            AdminClient(client).list_topics()


# a certificate for another name, or an untrusted CA: tests/security/test_client_tls_errors.py
def test_no_endpoint_identification_accepts_it(other_name_broker, pki):
    config = {
        **client_config(other_name_broker, pki, "SSL", None),
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert round_trip(config) == RECORDS


def test_bad_security_settings_are_config_errors(pki):
    base = {"bootstrap.servers": "127.0.0.1:1"}
    with pytest.raises(ConfigException, match="security.protocol"):
        Producer({**base, "security.protocol": "tls"})
    with pytest.raises(ConfigException, match="sasl.mechanism"):
        Producer({**base, "security.protocol": "sasl_plaintext", "sasl.username": "u"})
    with pytest.raises(ConfigException, match="ssl.ca.location"):
        Consumer({**base, "security.protocol": "ssl", "ssl.ca.location": "/nonexistent"})
    with pytest.raises(ConfigException, match="sasl.username and sasl.password") as failure:
        AdminClient({**base, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                     "sasl.password": "s3cret", "ssl.ca.location": pki.ca})  # fmt: skip
    assert "s3cret" not in str(failure.value)


# -- the CLI with --command-config -------------------------------------------------------------


def _command_config(tmp_path, config: dict) -> str:
    path = tmp_path / "client.properties"
    lines = ["# like Kafka's tools' --command-config"]
    lines += [f"{key}={value}" for key, value in config.items() if key != "bootstrap.servers"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_cli_with_command_config_over_sasl_ssl(secure_broker, pki, tmp_path):
    config = client_config(secure_broker, pki, "SASL_SSL", "SCRAM-SHA-512")
    b = ("--bootstrap-server", config["bootstrap.servers"])
    cc = ("--command-config", _command_config(tmp_path, config))
    topic = _topic()
    assert main(["topics", "create", *b, *cc, "--topic", topic, "--partitions", "1"]) == 0
    assert topic in _onceflow("topics", "list", *b, *cc).stdout.decode().splitlines()
    _onceflow("produce", topic, *b, *cc, stdin=b"one\ntwo\n")
    consumed = _onceflow("consume", topic, *b, *cc, "--from-beginning", "--max-messages", "2",
                         "--timeout-ms", "10000")  # fmt: skip
    assert consumed.stdout.splitlines() == [b"one", b"two"]


def _onceflow(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """`python -m onceflow ARGV`, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "onceflow", *argv],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_cli_without_the_credentials_fails_with_one_line(secure_broker, pki, tmp_path, capsys):
    config = client_config(secure_broker, pki, "SASL_SSL", "SCRAM-SHA-512", "wrong")
    b = ("--bootstrap-server", config["bootstrap.servers"])
    cc = ("--command-config", _command_config(tmp_path, config))
    assert main(["topics", "list", *b, *cc]) == 1
    err = capsys.readouterr().err
    assert "SASL_AUTHENTICATION_FAILED" in err and "wrong" not in err


def test_init_transactions_with_a_wrong_password_raises(secure_broker, pki):
    config = client_config(secure_broker, pki, "SASL_SSL", "SCRAM-SHA-512", "wrong")
    producer = Producer({**config, "transactional.id": _topic(), "max.block.ms": 600_000})
    try:
        with pytest.raises(SaslAuthenticationFailedError):  # not a max.block.ms timeout
            producer.init_transactions()
    finally:
        producer.close(5)
