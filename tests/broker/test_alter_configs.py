"""AlterConfigs (replace) and IncrementalAlterConfigs (SET/DELETE/APPEND/SUBTRACT) on topics:
validated as at creation, durable, applied at once; broker configs are static."""

from __future__ import annotations

import asyncio

import pytest

from broker.broker_helpers import call, create
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.alter_configs import AlterConfigsRequest
from onceflow.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def alter(state, version, resources, validate_only=False):
    cls = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest(
        resources=[
            cls(
                resource_type=kind,
                resource_name=name,
                configs=[cls.AlterableConfig(name=k, value=v) for k, v in configs.items()],
            )
            for kind, name, configs in resources
        ],
        validate_only=validate_only,
    )
    response = asyncio.run(call(state, ApiKey.ALTER_CONFIGS, version, request))
    return [(r.error_code, r.error_message) for r in response.responses]


def incremental(state, version, name, ops, validate_only=False, kind=TOPIC):
    cls = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(
        resources=[
            cls(
                resource_type=kind,
                resource_name=name,
                configs=[
                    cls.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops
                ],
            )
        ],
        validate_only=validate_only,
    )
    response = asyncio.run(call(state, ApiKey.INCREMENTAL_ALTER_CONFIGS, version, request))
    [r] = response.responses
    return r.error_code, r.error_message


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_the_overrides(state, version):
    create(state, "t", 2, **{"retention.ms": 1000, "segment.ms": 5000})
    assert alter(state, version, [(TOPIC, "t", {"retention.ms": "7000"})]) == [(0, None)]
    assert state.logs.topic("t").configs == {"retention.ms": "7000"}  # segment.ms reverted
    assert all(state.get_log("t", p).config.retention_ms == 7000 for p in range(2))
    assert state.get_log("t", 0).config.segment_ms == 7 * 24 * 3_600_000


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_operations(state, version):
    create(state, "t", 1, **{"retention.ms": 1000})
    assert (
        incremental(
            state, version, "t", [("segment.ms", SET, "9000"), ("retention.ms", DELETE, None)]
        )[0]
        == 0
    )
    assert state.logs.topic("t").configs == {"segment.ms": "9000"}
    assert incremental(state, version, "t", [("cleanup.policy", APPEND, "compact")])[0] == 0
    assert state.get_log("t", 0).config.cleanup_policy == ("delete", "compact")
    assert incremental(state, version, "t", [("cleanup.policy", SUBTRACT, "delete")])[0] == 0
    assert state.logs.topic("t").configs["cleanup.policy"] == "compact"
    error, message = incremental(state, version, "t", [("retention.ms", APPEND, "5")])
    assert error == ErrorCode.INVALID_CONFIG
    assert message == "Config value append is not allowed for config key: retention.ms"


def test_bad_changes_change_nothing(state):
    create(state, "t", 1, **{"retention.ms": 1000})
    before = dict(state.logs.topic("t").configs)
    cases = [
        ([("retention.ms", SET, "abc")], ErrorCode.INVALID_CONFIG, "not a whole number"),
        ([("no.such.key", SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown topic config name"),
        (
            [("segment.ms", SET, "5"), ("compression.type", SET, "brotli")],
            ErrorCode.INVALID_CONFIG,
            "compression.type",
        ),
        (
            [("segment.ms", SET, "5"), ("segment.ms", SET, "6")],
            ErrorCode.INVALID_REQUEST,
            "duplicate",
        ),
        ([("segment.ms", SET, None)], ErrorCode.INVALID_REQUEST, "Null value"),
    ]
    for ops, error, text in cases:
        got_error, message = incremental(state, 1, "t", ops)
        assert got_error == error and text in message, ops
    assert incremental(state, 1, "t", [("segment.ms", SET, "5")], validate_only=True) == (0, None)
    assert alter(state, 2, [(TOPIC, "t", {"segment.ms": "5"})], validate_only=True) == [(0, None)]
    assert state.logs.topic("t").configs == before
    assert incremental(state, 1, "nope", [("segment.ms", SET, "5")])[0] == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_onceflows_own_broker_configs_are_static(state):
    error, message = incremental(state, 1, "1", [("log.retention.ms", SET, "5")], kind=BROKER)
    assert error == ErrorCode.INVALID_REQUEST
    assert "Cannot update these configs dynamically: log.retention.ms" in message
    assert alter(state, 0, [(BROKER, "", {})]) == [(0, None)]
    assert alter(state, 0, [(BROKER, "7", {"x": "1"})])[0][0] == ErrorCode.INVALID_REQUEST
    assert alter(state, 0, [(8, "logger", {"x": "1"})])[0][0] == ErrorCode.INVALID_REQUEST


def test_changes_survive_a_restart(state_factory):
    first = state_factory("d")
    create(first, "t", 1)
    assert incremental(first, 1, "t", [("retention.ms", SET, "4242")])[0] == 0
    asyncio.run(first.close())
    again = state_factory("d")
    assert again.logs.topic("t").configs == {"retention.ms": "4242"}
    assert again.get_log("t", 0).config.retention_ms == 4242


def test_kafkas_dynamic_broker_configs_for_absent_features_are_stored(state_factory):
    """Kafka lets clients set per-broker SSL/SASL, thread-pool and cleaner configs at runtime;
    onceflow has none of those features, so it stores them (durably) and describes them, and
    still refuses its own static configs."""
    from onceflow.protocol.messages.describe_configs import DescribeConfigsRequest

    state = state_factory("d")
    ops = [
        ("sasl.kerberos.min.time.before.relogin", SET, "58000"),
        ("background.threads", SET, "9"),
    ]
    assert incremental(state, 1, "1", ops, kind=BROKER) == (0, None)
    assert alter(state, 1, [(BROKER, "1", {"log.cleaner.threads": "2"})]) == [(0, None)]
    error, message = incremental(
        state, 1, "1", [("background.threads", SET, "3"), ("num.partitions", SET, "5")], kind=BROKER
    )
    assert error == ErrorCode.INVALID_REQUEST and "num.partitions" in message
    assert state.dynamic_configs.values["background.threads"] == "9"  # all or nothing
    asyncio.run(state.close())

    again = state_factory("d")
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=BROKER, resource_name="1", configuration_keys=None
            )
        ]
    )
    response = asyncio.run(call(again, ApiKey.DESCRIBE_CONFIGS, 4, request))
    entries = {c.name: (c.value, c.config_source) for c in response.results[0].configs}
    assert entries["sasl.kerberos.min.time.before.relogin"] == ("58000", 2)  # DYNAMIC_BROKER
    assert entries["background.threads"] == ("9", 2)
    assert entries["num.partitions"][1] == 5  # onceflow's own: still the default
    assert incremental(again, 1, "1", [("background.threads", DELETE, None)], kind=BROKER)[0] == 0
    assert "background.threads" not in again.dynamic_configs.values


@pytest.mark.parametrize("kind, name", [(8, "BROKER_LOGGER"), (16, "CLIENT_METRICS"),
                                        (32, "GROUP"), (64, "64")])  # fmt: skip
def test_config_resource_types_onceflow_lacks_are_invalid_request(state, kind, name):
    """Kafka's broker answers a resource type it does not handle with INVALID_REQUEST
    "Unsupported resource type: <type>"; onceflow has no group, client-metrics or logger
    configs, so all three config APIs answer so (kafka-configs --entity-type groups)."""
    from onceflow.protocol.messages.describe_configs import DescribeConfigsRequest

    expected = (ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {name}")
    assert alter(state, 2, [(kind, "g", {"consumer.session.timeout.ms": "45000"})]) == [expected]
    assert incremental(state, 1, "g", [("x", SET, "1")], kind=kind) == expected
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=kind, resource_name="g", configuration_keys=None
    )
    request = DescribeConfigsRequest(resources=[resource])
    (result,) = asyncio.run(call(state, ApiKey.DESCRIBE_CONFIGS, 4, request)).results
    assert (result.error_code, result.error_message, result.configs) == (*expected, [])
