"""onceflow's client against Apache Kafka's OAUTHBEARER listeners: one with Kafka's unsecured
validator (`OAuthBearerUnsecuredValidatorCallbackHandler`, the default), one with its OIDC
validator (`OAuthBearerValidatorCallbackHandler`) reading the JWKS file of the local test
issuer (Kafka 4.x only fetches URLs named by the system property
`org.apache.kafka.sasl.oauthbearer.allowed.urls`). The StandardAuthorizer is on, so the
token's sub is the principal Kafka's ACLs apply to. One 3-node cluster for the module (topics
replicated 3 ways), so a client logs in to more than one node."""

from __future__ import annotations

import time
import uuid

import pytest
from support.client_round_trip import produce, round_trip
from support.oauth_kafka import SIGNED, UNSECURED, start_oauth_kafka
from support.oidc_issuer import (
    WRITER,
    WRITER_SECRET,
    oidc_config,
    sasl_config,
    unsecured_token,
)

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.errors import SaslAuthenticationFailedError, TopicAuthorizationFailedError
from onceflow.security.acl import AclOperation
from security.acl_helpers import allow, binding_filter

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SECRET = WRITER_SECRET
RECORDS = [b"k-%d" % i for i in range(3)]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory, issuer):
    cluster = start_oauth_kafka(tmp_path_factory.mktemp("kafka-oauth"), issuer, nodes=3)
    yield cluster
    cluster.stop()


ACL_PROPAGATION_S = 30.0


def _topic_with_acls(kafka, *principals: str) -> str:
    """A new topic and READ/WRITE ACLs on it, once every node has them: Kafka's nodes learn of
    ACLs from the metadata log, each in its own time."""
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    acls = [
        allow(op, topic, principal=p)
        for p in principals
        for op in (AclOperation.WRITE, AclOperation.READ)
    ]
    with AdminClient({"bootstrap.servers": kafka.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 3, 3)])
        admin.create_acls(acls)
    deadline = time.monotonic() + ACL_PROPAGATION_S
    for node in kafka.nodes:
        with AdminClient({"bootstrap.servers": node.address}) as admin:
            while len(admin.describe_acls(binding_filter(name=topic))) < len(acls):
                assert time.monotonic() < deadline, f"node {node.node_id} lacks the ACLs"
                time.sleep(0.2)
    return topic


def test_unsecured_token_on_kafkas_unsecured_validator(kafka):
    topic = _topic_with_acls(kafka, "User:alice")
    config = sasl_config(
        kafka.listener_bootstrap(UNSECURED),
        **{
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=alice scope=kafka lifeSeconds=600",
        },
    )
    assert round_trip(config, topic, RECORDS) == RECORDS


def test_expired_token_is_refused_as_onceflow_refuses_it(kafka):
    def expired_cb(_config_str):
        return unsecured_token("alice", life_s=-600), time.time() + 600

    config = sasl_config(kafka.listener_bootstrap(UNSECURED), oauth_cb=expired_cb)
    with pytest.raises(SaslAuthenticationFailedError) as failure:
        with AdminClient(config) as admin:
            admin.list_topics()
    assert "invalid_token" in str(failure.value)


def test_oidc_on_kafkas_jwks_validator_and_acls_apply(kafka, issuer):
    topic = _topic_with_acls(kafka, f"User:{WRITER}")
    bootstrap = kafka.listener_bootstrap(SIGNED)
    assert round_trip(oidc_config(bootstrap, issuer, WRITER, SECRET), topic, RECORDS) == RECORDS
    with pytest.raises(TopicAuthorizationFailedError):
        produce(oidc_config(bootstrap, issuer, "mallory", "m"), topic, RECORDS)


def test_jaas_config_oidc_login_on_kafka(kafka, issuer):
    topic = _topic_with_acls(kafka, f"User:{WRITER}")
    config = {
        "bootstrap.servers": kafka.listener_bootstrap(SIGNED),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.oauthbearer.token.endpoint.url": issuer.token_url,
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        f'required clientId="{WRITER}" clientSecret="{SECRET}" scope="kafka";',
    }
    assert round_trip(config, topic, RECORDS) == RECORDS


def test_signed_listener_refuses_an_unsecured_token(kafka):
    config = sasl_config(
        kafka.listener_bootstrap(SIGNED),
        **{
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": "principal=x",
        },
    )
    with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
        with AdminClient(config) as admin:
            admin.list_topics()
