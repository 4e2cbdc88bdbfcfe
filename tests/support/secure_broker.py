"""A broker process with every kind of listener, and confluent-kafka-style client settings for
each: shared by the interop tests of real clients (tests/interop/test_security_clients.py) and
of onceflow's own client (tests/security/test_client_security.py).

The broker has four listeners (PLAINTEXT for setup, SSL with ssl.client.auth=requested,
SASL_PLAINTEXT, SASL_SSL) and one user from onceflow.sasl.bootstrap.users.
"""

from __future__ import annotations

import re
from pathlib import Path

from support.broker import BrokerProcess
from support.pki import Pki, server_keystore_for, tls_broker_config

USER, PASSWORD = "alice", "alice-secret"
# (listener, mechanism or None for mutual TLS)
CASES = [
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SSL", None),
]
CASE_IDS = [f"{listener}-{mechanism or 'mTLS'}" for listener, mechanism in CASES]


def listener_ports(broker: BrokerProcess) -> dict[str, int]:
    """Listener name -> port, from the broker's log."""
    found = re.findall(r"listener (\w+) \(\w+\) on 127\.0\.0\.1:(\d+)", broker.log_text())
    return {name: int(port) for name, port in found}


def start_secure_broker(data_dir: Path, pki: Pki, **extra: str) -> BrokerProcess:
    """The four-listener broker; `broker.listener_port` maps listener names to ports."""
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,"
        "SASL_SSL://127.0.0.1:0",
        "onceflow.sasl.bootstrap.users": f"SCRAM-SHA-512=[name={USER},password={PASSWORD}];"
        f"SCRAM-SHA-256=[name={USER},password={PASSWORD}]",
        **tls_broker_config(pki, "requested"),
        **extra,
    }
    broker = BrokerProcess(data_dir, config)
    broker.listener_port = listener_ports(broker)
    return broker


def start_other_name_broker(data_dir: Path, pki: Pki) -> BrokerProcess:
    """An SSL-only broker whose certificate names only other.example, not 127.0.0.1."""
    config = {
        "listeners": "SSL://127.0.0.1:0",
        **tls_broker_config(pki, "none"),
        "ssl.keystore.location": server_keystore_for(pki, "other", "DNS:other.example"),
    }
    broker = BrokerProcess(data_dir, config)
    broker.listener_port = listener_ports(broker)
    return broker


def address(broker: BrokerProcess, listener: str) -> str:
    return f"127.0.0.1:{broker.listener_port[listener]}"


def confluent_config(
    broker: BrokerProcess, pki: Pki, listener: str, mechanism: str | None, password=PASSWORD
) -> dict:
    """confluent-kafka's (librdkafka's) settings for one listener; the same names serve
    onceflow's client."""
    config = {
        "bootstrap.servers": address(broker, listener),
        "security.protocol": listener.lower(),
    }
    if listener.endswith("SSL"):
        config["ssl.ca.location"] = pki.ca
    if mechanism is None:
        config["ssl.certificate.location"] = pki.path("client.crt")
        config["ssl.key.location"] = pki.path("client.key")
    else:
        config.update(
            {"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": password}
        )
    return config
