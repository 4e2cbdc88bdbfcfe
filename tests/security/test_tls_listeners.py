"""Listeners and TLS through an in-process broker: several listeners at once, Metadata with
the advertised address of the listener a request came in on, the principal of a client
certificate (default rule and mapping rules), client-auth modes, and bad input (plaintext on a
TLS port, TLS on a PLAINTEXT port, untrusted certificates, TLS 1.1): one log line, a closed
connection, and the broker keeps serving."""

from __future__ import annotations

import asyncio
import logging
import ssl

import pytest
from support.pki import CLIENT_DN, KEY_PASSWORD, tls_broker_config

from onceflow.broker.config import BrokerConfig, ConfigError
from onceflow.broker.context import ANONYMOUS
from onceflow.broker.server import Broker
from onceflow.broker.tls import NoMatchingRuleError, PrincipalMapper, subject_dn
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.api_versions import ApiVersionsRequest
from onceflow.protocol.messages.metadata import MetadataRequest
from security.live import RawClient, client_tls, connections_of, running_broker

pytestmark = pytest.mark.timeout(60)

THREE_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CLIENT://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CLIENT:SSL",
    "advertised.listeners": "PLAINTEXT://plain.example:1111,CLIENT://client.example:2222",
    "inter.broker.listener.name": "PLAINTEXT",
}


async def _metadata_broker(client: RawClient) -> tuple[str, int]:
    response = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
    (broker,) = response.brokers
    return broker.host, broker.port


async def _principal(broker: Broker, listener: str, tls: ssl.SSLContext) -> str:
    client = await RawClient.connect(broker.bound_listeners[listener], tls)
    try:
        await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        (connection,) = connections_of(broker, listener)
        return connection.ctx.principal
    finally:
        await client.close()


def test_each_listener_answers_metadata_with_its_advertised_address(tmp_path, pki):
    async def scenario():
        config = {**THREE_LISTENERS, **tls_broker_config(pki)}
        async with running_broker(tmp_path / "data", **config) as broker:
            plain = await RawClient.connect(broker.bound_listeners["PLAINTEXT"])
            ssl_bound = broker.bound_listeners["SSL"]
            over_ssl = await RawClient.connect(ssl_bound, client_tls(pki))
            custom = await RawClient.connect(broker.bound_listeners["CLIENT"], client_tls(pki))
            assert await _metadata_broker(plain) == ("plain.example", 1111)
            # not in advertised.listeners: the bound address
            assert await _metadata_broker(over_ssl) == ("127.0.0.1", ssl_bound.port)
            assert await _metadata_broker(custom) == ("client.example", 2222)
            for client in (plain, over_ssl, custom):
                await client.close()

    asyncio.run(scenario())


def test_client_certificate_principal_default_rule_and_anonymous(tmp_path, pki):
    async def scenario():
        config = {"listeners": "SSL://127.0.0.1:0", **tls_broker_config(pki, "requested")}
        async with running_broker(tmp_path / "data", **config) as broker:
            assert await _principal(broker, "SSL", client_tls(pki, "client")) == (
                f"User:{CLIENT_DN}"
            )
            assert await _principal(broker, "SSL", client_tls(pki)) == ANONYMOUS

    asyncio.run(scenario())


def test_principal_mapping_rules_apply_in_order(tmp_path, pki):
    async def scenario():
        config = {
            "listeners": "SSL://127.0.0.1:0",
            **tls_broker_config(pki, "required"),
            "ssl.principal.mapping.rules": "RULE:^CN=nobody,.*$/x/,RULE:^CN=(.*?),OU=.*$/$1/U,"
            "DEFAULT",
        }
        async with running_broker(tmp_path / "data", **config) as broker:
            assert await _principal(broker, "SSL", client_tls(pki, "client")) == "User:CLIENT"

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("rules", "dn", "expected"),
    [
        ("DEFAULT", "CN=a,O=b", "CN=a,O=b"),
        ("RULE:^CN=(.*?),O=(.*)$/$1@$2/L", "CN=Alice,O=Acme", "alice@acme"),
        ("RULE:^CN=(.*?),O=(.*)$/$1\\/$2/", "CN=a,O=b", "a/b"),
        ("RULE:^OU=x$/y/, DEFAULT", "CN=a", "CN=a"),
    ],
)
def test_principal_mapper_table(rules, dn, expected):
    assert PrincipalMapper(rules).name(dn) == expected


def test_principal_mapper_without_matching_rule_raises_and_bad_rules_are_config_errors():
    with pytest.raises(NoMatchingRuleError):
        PrincipalMapper("RULE:^OU=x$/y/").name("CN=a")
    with pytest.raises(ConfigError):
        PrincipalMapper("RULE:broken")


def test_subject_dn_is_rfc2253_most_specific_first_with_escapes():
    certificate = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Acme, Inc."),),
            (("commonName", "#a+b"),),
        )
    }
    assert subject_dn(certificate) == "CN=\\#a\\+b,O=Acme\\, Inc.,C=US"


def test_required_client_auth_refuses_missing_and_untrusted_certificates(tmp_path, pki, caplog):
    async def scenario():
        config = {"listeners": "SSL://127.0.0.1:0", **tls_broker_config(pki, "required")}
        async with running_broker(tmp_path / "data", **config) as broker:
            address = broker.bound_listeners["SSL"]
            for certificate in (None, "rogue"):
                caplog.clear()
                with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                    client = await RawClient.connect(address, client_tls(pki, certificate))
                    # TLS 1.3: the client learns of the refusal on its first read
                    await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
                await asyncio.sleep(0.1)
                failures = [r for r in caplog.records if "TLS handshake with" in r.getMessage()]
                assert len(failures) == 1, [r.getMessage() for r in caplog.records]
            # still serving a good client
            assert await _principal(broker, "SSL", client_tls(pki, "client")) == (
                f"User:{CLIENT_DN}"
            )

    with caplog.at_level(logging.WARNING, logger="onceflow.broker"):
        asyncio.run(scenario())


def test_tls_below_1_2_is_refused(tmp_path, pki, caplog):
    async def scenario():
        config = {"listeners": "SSL://127.0.0.1:0", **tls_broker_config(pki, "none")}
        async with running_broker(tmp_path / "data", **config) as broker:
            old = client_tls(pki)
            try:
                old.minimum_version = ssl.TLSVersion.TLSv1_1
                old.maximum_version = ssl.TLSVersion.TLSv1_1
                old.set_ciphers("ALL:@SECLEVEL=0")
            except (ValueError, ssl.SSLError):
                pytest.skip("this OpenSSL cannot offer TLS 1.1")
            with pytest.raises((ssl.SSLError, ConnectionError)):
                await RawClient.connect(broker.bound_listeners["SSL"], old)
            await asyncio.sleep(0.1)
            assert any("TLS handshake with" in r.getMessage() for r in caplog.records)

    with caplog.at_level(logging.WARNING, logger="onceflow.broker"):
        asyncio.run(scenario())


def test_plaintext_on_tls_port_and_tls_on_plaintext_port_are_closed(tmp_path, pki, caplog):
    async def scenario():
        config = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
            **tls_broker_config(pki, "none"),
        }
        async with running_broker(tmp_path / "data", **config) as broker:
            # a Kafka request in clear on the TLS port
            client = await RawClient.connect(broker.bound_listeners["SSL"])
            await client.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            assert await client.closed_by_peer()
            # a TLS ClientHello on the PLAINTEXT port
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", broker.bound_listeners["PLAINTEXT"].port
            )
            hello = ssl.MemoryBIO(), ssl.MemoryBIO()
            tls_object = client_tls(pki).wrap_bio(*hello, server_hostname="localhost")
            with pytest.raises(ssl.SSLWantReadError):
                tls_object.do_handshake()
            writer.write(hello[1].read())
            assert await asyncio.wait_for(reader.read(1), 10) == b""
            writer.close()
            await asyncio.sleep(0.1)
            messages = [r.getMessage() for r in caplog.records]
            assert sum("TLS handshake with" in m for m in messages) == 1, messages
            assert sum("exceeds socket.request.max.bytes" in m for m in messages) == 1, messages
            plain = await RawClient.connect(broker.bound_listeners["PLAINTEXT"])
            assert (
                await plain.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
            ).error_code == 0
            await plain.close()

    with caplog.at_level(logging.WARNING, logger="onceflow.broker"):
        asyncio.run(scenario())


@pytest.mark.parametrize("form", ["location", "inline"])
def test_encrypted_key_and_inline_pem_keystores_load(tmp_path, pki, form):
    async def scenario():
        chain = open(pki.path("server.crt")).read()
        key = open(pki.path("server_encrypted.key")).read()
        if form == "location":
            keystore = tmp_path / "keystore.pem"
            keystore.write_text(chain + key)
            keys = {"ssl.keystore.location": str(keystore)}
        else:
            keys = {"ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key}
        config = {"listeners": "SSL://127.0.0.1:0", "ssl.key.password": KEY_PASSWORD, **keys}
        async with running_broker(tmp_path / "data", **config) as broker:
            assert await _principal(broker, "SSL", client_tls(pki)) == ANONYMOUS

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "needs ssl.keystore.location"),
        ({"ssl.keystore.location": "/nonexistent.pem"}, "cannot load the TLS keystore"),
        ({"ssl.client.auth": "required", "ssl.keystore.location": "{ks}"}, "needs ssl.truststore"),
        ({"ssl.enabled.protocols": "TLSv1.1", "ssl.keystore.location": "{ks}"}, "TLSv1.2"),
    ],
)
def test_tls_misconfiguration_stops_the_start(tmp_path, pki, config, message):
    values = {k: v.format(ks=pki.server_keystore) for k, v in config.items()}
    values.update({"log.dirs": str(tmp_path / "data"), "listeners": "SSL://127.0.0.1:0"})

    async def scenario():
        broker = Broker(BrokerConfig(values))
        try:
            with pytest.raises(ConfigError, match=message):
                await broker.start()
        finally:
            await broker.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("listeners", "message"),
    [
        ("PLAINTEXT://:1,PLAINTEXT://:2", "unique"),
        ("PLAINTEXT://:1,SSL://:1", "own port"),
        ("INTERNAL://:1", "no security protocol for listener INTERNAL"),
    ],
)
def test_bad_listeners_name_the_key(listeners, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({"listeners": listeners})
