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
