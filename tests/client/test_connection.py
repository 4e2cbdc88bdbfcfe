"""BrokerConnection against a scripted fake broker: version negotiation, headers, failures.

The fake broker (`tests/support/fake_broker.py`) speaks the real protocol, so these tests run
without the real broker and can script what a real broker rarely does (an old ApiVersions
range, a wrong correlation id, silence).
"""

from __future__ import annotations

import socket

import pytest
from support.fake_broker import FakeBroker

from onceflow.client.connection import BrokerConnection, connect_bootstrap
from onceflow.client.errors import (
    BrokerResponseError,
    KafkaConnectionError,
    KafkaTimeoutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_error,
)
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages import REQUESTS


@pytest.fixture
def fake():
    brokers: list[FakeBroker] = []

    def start(versions=None, behaviour="normal") -> FakeBroker:
        versions = versions or {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12)}
        broker = FakeBroker(versions, behaviour=behaviour)
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.stop()


def _metadata():
    return REQUESTS[ApiKey.METADATA](topics=[])


def test_negotiates_the_highest_common_version_and_uses_flexible_headers(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (1, 10)})
    with BrokerConnection("127.0.0.1", broker.port, client_id="me") as conn:
        assert conn.api_version(ApiKey.METADATA) == 10
        response = conn.send(_metadata())
    assert response.cluster_id == "fake"
    # ApiVersions v4, refused, then v3 (flexible: header v2); Metadata v10 (flexible: header v2)
    assert broker.seen == [
        (ApiKey.API_VERSIONS, 4, 2, "me"),
        (ApiKey.API_VERSIONS, 3, 2, "me"),
        (ApiKey.METADATA, 10, 2, "me"),
    ]


def test_non_flexible_versions_use_header_v1(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 5)})
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        assert conn.send(_metadata()).controller_id == 1
    assert broker.seen[-1][:3] == (ApiKey.METADATA, 5, 1)


def test_falls_back_when_the_broker_does_not_know_our_api_versions_version(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 9)})
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        assert conn.broker_versions[ApiKey.METADATA] == (0, 9)
    ours = REQUESTS[ApiKey.API_VERSIONS].VALID_VERSIONS[1]
    assert [(k, v) for k, v, _, _ in broker.seen] == [
        (ApiKey.API_VERSIONS, ours),
        (ApiKey.API_VERSIONS, 2),
    ]


def test_an_api_the_broker_lacks_or_a_disjoint_range_is_unsupported(fake):
    broker = fake({ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (50, 60)})
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        with pytest.raises(UnsupportedVersionError, match="broker versions 50-60"):
            conn.api_version(ApiKey.METADATA)
        with pytest.raises(UnsupportedVersionError, match="does not support PRODUCE"):
            conn.api_version(ApiKey.PRODUCE)


def test_correlation_id_mismatch_is_detected(fake):
    broker = fake(behaviour="wrong-correlation")
    with BrokerConnection("127.0.0.1", broker.port) as conn:
        with pytest.raises(BrokerResponseError, match="correlation id"):
            conn.send(_metadata())


def test_broker_closing_mid_request_raises_connection_error(fake):
    broker = fake(behaviour="close")
    conn = BrokerConnection("127.0.0.1", broker.port).connect()
    with pytest.raises(KafkaConnectionError, match="closed"):
        conn.send(_metadata())
    assert not conn.connected


def test_silent_broker_times_out(fake):
    broker = fake(behaviour="silent")
    conn = BrokerConnection("127.0.0.1", broker.port, request_timeout_ms=300).connect()
    with pytest.raises(KafkaTimeoutError, match="300 ms"):
        conn.send(_metadata())
    conn.close()


def test_connect_bootstrap_skips_unreachable_brokers(fake):
    broker = fake()
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    conn = connect_bootstrap(f"127.0.0.1:{dead}, 127.0.0.1:{broker.port}")
    assert conn.port == broker.port
    conn.close()
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{dead}"):
        connect_bootstrap(f"127.0.0.1:{dead}")
    with pytest.raises(ValueError, match="host:port"):
        connect_bootstrap("nohost")


def test_typed_errors_are_named_after_kafkas():
    err = error_for_code(ErrorCode.TOPIC_ALREADY_EXISTS, "t")
    assert isinstance(err, TopicAlreadyExistsError)
    assert str(err) == "TOPIC_ALREADY_EXISTS: t"
    assert not err.retriable
    assert error_for_code(3).retriable
    assert type(error_for_code(17)).__name__ == "InvalidTopicError"
    assert "error code 30000" in str(error_for_code(30000))
    with pytest.raises(UnknownTopicOrPartitionError):
        raise_for_error(3)
    raise_for_error(0)
