"""PKCS12 and JKS key and trust stores made by the JDK's keytool (tests/support/java_stores.py):
the JKS reader (client.net.jks) on them, their errors (wrong store or key password, a damaged
store, JCEKS), and onceflow's client over mutual TLS with each combination of key and trust
store against a broker that requires a client certificate; without the key store the broker
refuses the handshake, so the store's certificate is what gets the client in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.broker import BrokerProcess
from support.client_round_trip import round_trip
from support.java_stores import KEY_PASSWORD, STORE_PASSWORD, TRUST_PASSWORD, make_java_stores
from support.pki import tls_broker_config
from support.secure_broker import address, listener_ports

from onceflow.client.admin import AdminClient
from onceflow.client.errors import ConfigException, KafkaConnectionError, SslAuthenticationError
from onceflow.client.net.jks import JksError, read_jks
from onceflow.client.net.security import client_security

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("keytool") is None, reason="no JDK keytool"),
]


@pytest.fixture(scope="module")
def stores(pki):
    return make_java_stores(pki)


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory, pki):
    """An SSL listener that requires a client certificate signed by the test CA."""
    config = {"listeners": "SSL://127.0.0.1:0", **tls_broker_config(pki, "required")}
    broker = BrokerProcess(tmp_path_factory.mktemp("mtls") / "data", config)
    broker.listener_port = listener_ports(broker)
    yield broker
    broker.stop()


def store_config(stores, key_type: str | None, trust_type: str) -> dict:
    trust = stores.trust_p12 if trust_type == "PKCS12" else stores.trust_jks
    config = {
        "security.protocol": "SSL",
        "ssl.truststore.location": trust,
        "ssl.truststore.type": trust_type,
        "ssl.truststore.password": TRUST_PASSWORD,
    }
    if key_type is not None:
        config |= {
            "ssl.keystore.location": stores.client_p12
            if key_type == "PKCS12"
            else stores.client_jks,
            "ssl.keystore.type": key_type,
            "ssl.keystore.password": STORE_PASSWORD,
        }
    if key_type == "JKS":
        config["ssl.key.password"] = KEY_PASSWORD
    return config


def test_jks_reader_on_keytool_stores(stores):
    with open(stores.client_jks, "rb") as file:
        data = file.read()
    store = read_jks(data, STORE_PASSWORD, KEY_PASSWORD)
    ((key, chain),) = store.private_keys.values()
    assert key.startswith(b"\x30") and len(chain) == 2  # PKCS#8 DER; client and CA
    with pytest.raises(JksError, match="store password is wrong"):
        read_jks(data, "wrong", KEY_PASSWORD)
    with pytest.raises(JksError, match="key password"):
        read_jks(data, STORE_PASSWORD, STORE_PASSWORD)
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0xFF
    with pytest.raises(JksError):
        read_jks(bytes(damaged), STORE_PASSWORD, KEY_PASSWORD)
    with pytest.raises(JksError, match="JCEKS"):
        read_jks(b"\xce\xce\xce\xce" + data[4:], STORE_PASSWORD)
    with open(stores.trust_jks, "rb") as file:
        trust = read_jks(file.read(), None, open_keys=False)  # no password: unchecked, as Java
    assert list(trust.certificates) == ["ca"]


@pytest.mark.parametrize("key_type", ["PKCS12", "JKS"])
@pytest.mark.parametrize("trust_type", ["PKCS12", "JKS"])
def test_mutual_tls_with_key_and_trust_stores(mtls_broker, stores, key_type, trust_type):
    config = {
        "bootstrap.servers": address(mtls_broker, "SSL"),
        **store_config(stores, key_type, trust_type),
    }
    topic = f"stores-{key_type}-{trust_type}".lower()
    assert round_trip(config, topic, [b"a", b"b"]) == [b"a", b"b"]


def test_without_the_key_store_the_broker_refuses(mtls_broker, stores):
    config = {"bootstrap.servers": address(mtls_broker, "SSL"), **store_config(stores, None, "JKS")}
    # onceflow's broker closes without a TLS alert (tests/security/test_client_tls_errors.py):
    # a TLS 1.3 client sees the close
    refused = (SslAuthenticationError, KafkaConnectionError)
    with pytest.raises(refused), AdminClient({**config, "retries": 0}) as admin:
        admin.list_topics()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"ssl.keystore.password": "wrong"}, "ssl.keystore.location"),
        ({"ssl.key.password": "wrong"}, "key password"),
        ({"ssl.truststore.password": "wrong"}, "ssl.truststore.location"),
        ({"ssl.keystore.type": "BKS"}, "PKCS12, JKS, PEM"),
        ({"ssl.ca.location": "/ca.pem"}, "not both"),
        ({"ssl.certificate.location": "/c.pem"}, "not both"),
    ],
    ids=["store-password", "key-password", "trust-password", "type", "ca-twice", "cert-twice"],
)
def test_store_errors_name_the_setting(stores, change, message):
    with pytest.raises(ConfigException, match=message) as failure:
        client_security({**store_config(stores, "JKS", "PKCS12"), **change})
    assert "wrong" not in str(failure.value).replace("is wrong", "")


def test_pem_key_store_and_trust_store(pki, tmp_path):
    keystore = tmp_path / "client.pem"
    keystore.write_text(
        Path(pki.path("client.crt")).read_text() + Path(pki.path("client.key")).read_text()
    )
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.type": "PEM",
            "ssl.truststore.location": pki.ca,
            "ssl.truststore.type": "PEM",
        }
    )
    assert security.ssl_context is not None and len(security.ssl_context.get_ca_certs()) == 1
