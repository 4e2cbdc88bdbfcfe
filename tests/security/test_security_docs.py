"""The settings blocks of docs/security.md's "SASL/OAUTHBEARER" section work as written: the
broker block starts a broker (with the test issuer's JWKS file in place of the provider's URL,
and the issuer minting the audience and issuer the block expects), the OIDC and
`sasl.jaas.config` client blocks log in with the client id and secret they name (the token
endpoint swapped for the local issuer's, TLS for plaintext), and the key/trust store block
loads keytool-made stores of the types it names."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from support.java_stores import STORE_PASSWORD, TRUST_PASSWORD, make_java_stores
from support.oidc_issuer import OidcIssuer
from support.sasl_broker import start_sasl_broker

from onceflow.client.admin import AdminClient
from onceflow.client.net.security import client_security

pytestmark = pytest.mark.timeout(120)

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
SECTION = "## SASL/OAUTHBEARER"


def properties_blocks() -> list[dict[str, str]]:
    text = DOC.read_text()
    section = text[text.index(SECTION) : text.index("\n## ", text.index(SECTION) + 1)]
    blocks = re.findall(r"```properties\n(.*?)```", section, re.DOTALL)
    parsed = []
    for block in blocks:
        lines = [line for line in block.splitlines() if line and not line.startswith("#")]
        parsed.append(dict(line.split("=", 1) for line in lines))
    return parsed


BROKER, OIDC, JAAS, STORES = properties_blocks()


def client_id_and_secret() -> tuple[str, str]:
    return OIDC["sasl.oauthbearer.client.id"], OIDC["sasl.oauthbearer.client.secret"]


@pytest.fixture(scope="module")
def issuer(tmp_path_factory):
    client, secret = client_id_and_secret()
    with OidcIssuer(
        tmp_path_factory.mktemp("issuer"),
        {client: secret},
        iss=BROKER["sasl.oauthbearer.expected.issuer"],
        aud=BROKER["sasl.oauthbearer.expected.audience"],
    ) as it:
        yield it


@pytest.fixture(scope="module")
def broker(tmp_path_factory, issuer):
    config = {**BROKER, "sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url}
    broker = start_sasl_broker(tmp_path_factory.mktemp("docs") / "data", **config)
    yield broker
    broker.stop()


def as_test_client(block: dict[str, str], broker, issuer) -> dict[str, str]:
    config = {k: v for k, v in block.items() if not k.startswith("ssl.")}
    assert config.pop("security.protocol") == "SASL_SSL"
    return {
        **config,
        "bootstrap.servers": broker.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
    }


@pytest.mark.parametrize("block", [OIDC, JAAS], ids=["oidc", "jaas"])
def test_client_blocks_log_in(broker, issuer, block):
    with AdminClient(as_test_client(block, broker, issuer)) as admin:
        admin.list_topics()
    assert f"authenticated User:{client_id_and_secret()[0]}" in broker.log_text()


@pytest.mark.skipif(shutil.which("keytool") is None, reason="no JDK keytool")
def test_store_block_loads_stores_of_its_types(pki):
    stores = make_java_stores(pki)
    trust = {"JKS": stores.trust_jks, "PKCS12": stores.trust_p12}[STORES["ssl.truststore.type"]]
    keys = {"JKS": stores.client_jks, "PKCS12": stores.client_p12}[STORES["ssl.keystore.type"]]
    config = {
        **STORES,
        "ssl.truststore.location": trust,
        "ssl.truststore.password": TRUST_PASSWORD,
        "ssl.keystore.location": keys,
        "ssl.keystore.password": STORE_PASSWORD,
    }
    security = client_security(config)
    assert security.ssl_context is not None and len(security.ssl_context.get_ca_certs()) == 1
