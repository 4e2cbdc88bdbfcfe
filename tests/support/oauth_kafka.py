"""An Apache Kafka cluster (1 or 3 nodes) with two SASL_PLAINTEXT OAUTHBEARER listeners:
OAUTH_UNSECURED with Kafka's default unsecured validator, OAUTH_SIGNED with its OIDC validator
(`OAuthBearerValidatorCallbackHandler`) reading the JWKS file of a local test issuer (Kafka 4.x
fetches only URLs named by `-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls`). The
StandardAuthorizer is on; the PLAINTEXT listener (setup, controllers) is `User:ANONYMOUS`, a
super user."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.kafka_cluster import KafkaCluster, KafkaUnavailable, kafka_libs
from support.oidc_issuer import OidcIssuer

UNSECURED, SIGNED = "OAUTH_UNSECURED", "OAUTH_SIGNED"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def start_oauth_kafka(directory: Path, issuer: OidcIssuer, nodes: int = 1) -> KafkaCluster:
    """Started; fails the test (never skips) when Kafka's jars are missing."""
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.fail(str(exc))
    signed = f"listener.name.{SIGNED.lower()}.oauthbearer."
    cluster = KafkaCluster(
        directory,
        nodes,
        extra_listeners={UNSECURED: "SASL_PLAINTEXT", SIGNED: "SASL_PLAINTEXT"},
        jvm_options=[
            f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={issuer.jwks_url},{issuer.token_url}"
        ],
        extra_config={
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            f"listener.name.{UNSECURED.lower()}.oauthbearer.sasl.jaas.config": LOGIN_MODULE,
            f"{signed}sasl.jaas.config": LOGIN_MODULE,
            f"{signed}sasl.server.callback.handler.class": VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": issuer.jwks_url,
            "sasl.oauthbearer.expected.audience": issuer.aud,
            "sasl.oauthbearer.expected.issuer": issuer.iss,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    )
    return cluster.start()
