"""SASL/OAUTHBEARER end to end: onceflow's Producer, Consumer and AdminClient, and librdkafka
(confluent-kafka), against broker processes with an OAUTHBEARER listener that validates real
JWTs: one in Kafka's unsecured-JWS mode, one against the JWKS file of the local test issuer
(tests/support/oidc_issuer.py), whose HTTP token endpoint serves the OIDC client-credentials
login. On the signed broker the authorizer is on, so the token's sub is the principal ACLs
apply to."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from support.client_round_trip import produce, round_trip
from support.oidc_issuer import AUDIENCE, ISSUER, WRITER, WRITER_SECRET, unsecured_token
from support.oidc_issuer import oidc_config as oauth_oidc_config
from support.oidc_issuer import sasl_config as oauth_sasl_config
from support.sasl_broker import start_sasl_broker

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.errors import (
    ConfigException,
    SaslAuthenticationFailedError,
    TopicAuthorizationFailedError,
)
from onceflow.client.producer import Producer
from onceflow.security.acl import AclOperation
from security.acl_helpers import allow

pytestmark = pytest.mark.timeout(120)

SECRET = WRITER_SECRET
RECORDS = [b"record-%d" % i for i in range(3)]


@pytest.fixture(scope="module")
def unsecured_broker(tmp_path_factory):
    broker = start_sasl_broker(
        tmp_path_factory.mktemp("unsecured") / "data",
        **{
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "connection.failed.authentication.delay.ms": 0,
        },
    )
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def signed_broker(tmp_path_factory, issuer):
    broker = start_sasl_broker(
        tmp_path_factory.mktemp("signed") / "data",
        **{
            "sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-256",
            "onceflow.sasl.bootstrap.users": f"SCRAM-SHA-256=[name=bob,password={SECRET}]",
            "sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            "authorizer.class.name": "onceflow.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",  # the PLAINTEXT setup listener
            "connection.failed.authentication.delay.ms": 0,
        },
    )
    yield broker
    broker.stop()


def _topic() -> str:
    return f"oauth-{uuid.uuid4().hex[:8]}"


def sasl_config(broker, **settings) -> dict:
    return oauth_sasl_config(broker.sasl_bootstrap, **settings)


def oidc_config(broker, issuer, client_id=WRITER, secret=SECRET) -> dict:
    return oauth_oidc_config(broker.sasl_bootstrap, issuer, client_id, secret)


def test_unsecured_token_round_trip(unsecured_broker):
    config = sasl_config(
        unsecured_broker,
        **{
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=alice scope=kafka lifeSeconds=600",
        },
    )
    assert round_trip(config, _topic(), RECORDS) == RECORDS
    assert "authenticated User:alice" in unsecured_broker.log_text()


def test_oauth_cb_token_and_an_expired_one(unsecured_broker):
    calls: list[str] = []

    def oauth_cb(config_str):
        calls.append(config_str)
        return unsecured_token("carol", life_s=600), time.time() + 600

    config = sasl_config(unsecured_broker, oauth_cb=oauth_cb, **{"sasl.oauthbearer.config": "x"})
    with AdminClient(config) as admin:
        admin.create_topics([NewTopic(_topic(), 1, 1)])
    assert calls and calls[0] == "x"

    def expired_cb(_config_str):
        return unsecured_token("carol", life_s=-600), time.time() + 600  # the broker decides

    with pytest.raises(SaslAuthenticationFailedError) as failure:
        with AdminClient(sasl_config(unsecured_broker, oauth_cb=expired_cb)) as admin:
            admin.list_topics()
    assert "invalid_token" in str(failure.value)
    assert "invalid token: the token expired" in unsecured_broker.log_text()


def test_the_producers_token_fetch_never_runs_on_its_event_loop(unsecured_broker):
    on_a_loop: list[bool] = []

    def oauth_cb(_config_str):
        try:
            asyncio.get_running_loop()
            on_a_loop.append(True)
        except RuntimeError:
            on_a_loop.append(False)
        return unsecured_token("erin", life_s=600), time.time() + 600

    config = sasl_config(unsecured_broker, oauth_cb=oauth_cb)
    assert round_trip(config, _topic(), RECORDS) == RECORDS
    assert on_a_loop and not any(on_a_loop)


def test_oidc_client_credentials_principal_is_the_sub_and_acls_apply(signed_broker, issuer):
    topic = _topic()
    setup = {"bootstrap.servers": signed_broker.bootstrap}
    with AdminClient(setup) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.create_acls(
            [
                allow(op, topic, principal=f"User:{WRITER}")
                for op in (AclOperation.WRITE, AclOperation.READ)
            ]
        )
    requests_before = len(issuer.requests)
    writer = oidc_config(signed_broker, issuer)
    assert round_trip(writer, topic, RECORDS) == RECORDS
    assert issuer.requests[requests_before]["scope"] == "kafka"
    assert f"authenticated User:{WRITER}" in signed_broker.log_text()
    # mallory's token is as valid, but no ACL names her
    with pytest.raises(TopicAuthorizationFailedError):
        produce(oidc_config(signed_broker, issuer, "mallory", "m"), topic, RECORDS)


def test_oidc_wrong_client_secret_fails_at_the_token_endpoint(signed_broker, issuer):
    with pytest.raises(SaslAuthenticationFailedError, match="HTTP 401"):
        with AdminClient(oidc_config(signed_broker, issuer, WRITER, "wrong")) as admin:
            admin.list_topics()


def test_signed_broker_rejects_an_unsecured_token(signed_broker):
    config = sasl_config(
        signed_broker,
        **{
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": f"principal={WRITER}",
        },
    )
    with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
        with AdminClient(config) as admin:
            admin.list_topics()


def test_without_a_token_provider_is_a_config_error():
    with pytest.raises(ConfigException, match="token provider"):
        Producer(sasl_config(type("B", (), {"sasl_bootstrap": "127.0.0.1:1"})()))


def test_jaas_config_oidc_and_scram_logins(signed_broker, issuer):
    topic = _topic()
    with AdminClient({"bootstrap.servers": signed_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.create_acls(
            [
                allow(AclOperation.DESCRIBE, topic, principal=p)
                for p in (f"User:{WRITER}", "User:bob")
            ]
        )
    module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
    oidc = {
        "bootstrap.servers": signed_broker.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
        "sasl.jaas.config": f'{module} required clientId="{WRITER}" clientSecret="{SECRET}";',
    }
    scram = {
        "bootstrap.servers": signed_broker.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="bob" password="{SECRET}";',
    }
    for config in (oidc, scram):
        with AdminClient(config) as admin:
            assert topic in admin.list_topics()
    log = signed_broker.log_text()
    assert f"authenticated User:{WRITER}" in log and "authenticated User:bob" in log


def test_librdkafka_oidc_login(signed_broker, issuer):
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    topic = _topic()
    with AdminClient({"bootstrap.servers": signed_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        admin.create_acls([allow(AclOperation.DESCRIBE, topic, principal=f"User:{WRITER}")])
    admin = ConfluentAdmin(oidc_config(signed_broker, issuer))
    metadata = admin.list_topics(timeout=20)
    assert topic in metadata.topics  # only the topic it may describe
    assert f"authenticated User:{WRITER}" in signed_broker.log_text()


def test_librdkafka_unsecured_login(unsecured_broker):
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    config = sasl_config(
        unsecured_broker,
        **{
            "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": "principal=dave scope=kafka",
        },
    )
    ConfluentAdmin(config).list_topics(timeout=20)
    assert "authenticated User:dave" in unsecured_broker.log_text()
