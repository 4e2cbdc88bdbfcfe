"""`kafka.*` security options of the Spark source and sink reach the onceflow client with their
confluent-kafka names and case-preserved values (Spark lower-cases only the keys). No Spark
session: the options mapping alone."""

from __future__ import annotations

import pytest

from onceflow.client.config import producer_config
from onceflow.client.consumer.config import consumer_config
from onceflow.client.errors import ConfigException
from onceflow.spark.options import parse_sink_options, parse_source_options

SECURITY = {
    "kafka.security.protocol": "SASL_SSL",
    "kafka.sasl.mechanism": "SCRAM-SHA-512",
    "kafka.sasl.username": "Alice",
    "kafka.sasl.password": "Secret-Pass",
    "kafka.ssl.endpoint.identification.algorithm": "none",
}


def _options(ca: str) -> dict[str, str]:
    # as Spark hands them over: keys lower-cased, values untouched
    spelled = {**SECURITY, "kafka.ssl.ca.location": ca, "kafka.bootstrap.servers": "h:9093"}
    return {k.lower(): v for k, v in spelled.items()}


def test_source_options_reach_the_consumer_config(tmp_path, pki):
    source = parse_source_options({**_options(pki.ca), "subscribe": "t"}, batch=False)
    security = consumer_config(source.client).security
    assert (security.protocol, security.mechanism) == ("sasl_ssl", "SCRAM-SHA-512")
    assert (security.username, security.password) == ("Alice", "Secret-Pass")
    assert security.ssl_context is not None and not security.ssl_context.check_hostname


def test_sink_options_reach_the_producer_config(pki):
    sink = parse_sink_options({**_options(pki.ca), "topic": "t"})
    security = producer_config(sink.client).security
    assert (security.protocol, security.mechanism, security.username) == (
        "sasl_ssl",
        "SCRAM-SHA-512",
        "Alice",
    )


def test_a_bad_security_option_is_a_config_error(pki):
    options = {**_options(pki.ca), "kafka.security.protocol": "tls", "topic": "t"}
    with pytest.raises(ConfigException, match="security.protocol"):
        producer_config(parse_sink_options(options).client)


def test_oauthbearer_jaas_and_store_options_reach_the_client(pki):
    """OIDC settings, an importable oauth_cb and Java's JAAS line keep their case-sensitive
    values through Spark's lower-casing of the keys."""
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="Spark-App" clientSecret="Mixed-Case";'
    )
    spelled = {
        "kafka.bootstrap.servers": "h:9093",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.oauthbearer.token.endpoint.url": "http://idp.example/Token",
        "kafka.sasl.jaas.config": jaas,
        "topic": "t",
    }
    sink = parse_sink_options({k.lower(): v for k, v in spelled.items()})
    security = producer_config(sink.client).security
    assert security.mechanism == "OAUTHBEARER" and security.token is not None
    provider = security.token.provider
    assert (provider.endpoint_url, provider.client_id) == ("http://idp.example/Token", "Spark-App")

    by_name = {"kafka.bootstrap.servers": "h:9093", "subscribe": "t"}
    by_name |= {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "OAUTHBEARER"}
    by_name["kafka.oauth_cb"] = "json:loads"  # any importable callable
    source = parse_source_options(by_name, batch=False)
    assert consumer_config(source.client).security.token is not None
