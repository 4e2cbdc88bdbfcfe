"""Authorized operations in Metadata, DescribeCluster and DescribeGroups: with no authorizer,
every operation Kafka supports on the resource type when asked for, INT32_MIN otherwise."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.broker_helpers import call
from broker.test_broker_group_membership import run_with_state, stable_member
from onceflow.broker.authorized_ops import operations_in, to_bit_field
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.describe_cluster import DescribeClusterRequest
from onceflow.protocol.messages.describe_groups import DescribeGroupsRequest
from onceflow.protocol.messages.metadata import MetadataRequest
from onceflow.security.acl import AclOperation as Op

OMITTED = -(2**31)
TOPIC_OPS = {
    Op.READ,
    Op.WRITE,
    Op.CREATE,
    Op.DELETE,
    Op.ALTER,
    Op.DESCRIBE,
    Op.DESCRIBE_CONFIGS,
    Op.ALTER_CONFIGS,
}
CLUSTER_OPS = {
    Op.CREATE,
    Op.CLUSTER_ACTION,
    Op.DESCRIBE_CONFIGS,
    Op.ALTER_CONFIGS,
    Op.IDEMPOTENT_WRITE,
    Op.ALTER,
    Op.DESCRIBE,
}
GROUP_OPS = {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}


def test_bit_field_is_one_bit_per_operation_code():
    assert to_bit_field([Op.READ, Op.WRITE]) == (1 << 3) | (1 << 4)
    # Kafka's topic field with no authorizer: READ..ALTER_CONFIGS except CLUSTER_ACTION
    assert to_bit_field(TOPIC_OPS) == 0b1101_1111_1000
    assert operations_in(OMITTED) == frozenset()


@pytest.mark.parametrize("asked", [False, True])
@pytest.mark.parametrize("version", range(8, 14))
def test_metadata_authorized_operations(state, version, asked):
    state.logs.create_topic("t", 1)
    missing_id = uuid.uuid4()
    topics = [MetadataRequest.MetadataRequestTopic(name=n) for n in ("t", "missing")]
    if version >= 12:  # v10-11 responses cannot carry a null name
        topics.append(MetadataRequest.MetadataRequestTopic(name=None, topic_id=missing_id))
    request = MetadataRequest(
        topics=topics,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=asked,
    )
    if version <= 10:
        request.include_cluster_authorized_operations = asked
    response = asyncio.run(call(state, ApiKey.METADATA, version, request))
    by_name = {t.name: t.topic_authorized_operations for t in response.topics}
    expected = to_bit_field(TOPIC_OPS) if asked else OMITTED
    # Kafka fills in every topic answered by name, known or not
    assert (by_name["t"], by_name["missing"]) == (expected, expected)
    if version >= 12:
        assert by_name[None] == OMITTED  # an unknown topic id is left out, as in Kafka
    if version <= 10:
        cluster = to_bit_field(CLUSTER_OPS) if asked else OMITTED
        assert response.cluster_authorized_operations == cluster


@pytest.mark.parametrize("asked", [False, True])
@pytest.mark.parametrize("version", range(0, 2))
def test_describe_cluster_authorized_operations(state, version, asked):
    request = DescribeClusterRequest(include_cluster_authorized_operations=asked)
    response = asyncio.run(call(state, ApiKey.DESCRIBE_CLUSTER, version, request))
    assert response.cluster_authorized_operations == (
        to_bit_field(CLUSTER_OPS) if asked else OMITTED
    )


@pytest.mark.parametrize("asked", [False, True])
@pytest.mark.parametrize("version", range(3, 7))
def test_describe_groups_authorized_operations(tmp_path, version, asked):
    async def scenario(state):
        await stable_member(state, "g")
        request = DescribeGroupsRequest(
            groups=["g", "missing"], include_authorized_operations=asked
        )
        return await call(state, ApiKey.DESCRIBE_GROUPS, version, request)

    found, missing = run_with_state(tmp_path, scenario).groups
    assert operations_in(found.authorized_operations) == (GROUP_OPS if asked else set())
    if version >= 6:
        assert missing.authorized_operations == OMITTED  # GROUP_ID_NOT_FOUND: left out
    else:
        # before v6 an unknown group is Dead with NONE, and Kafka fills in what has no error
        assert operations_in(missing.authorized_operations) == (GROUP_OPS if asked else set())
