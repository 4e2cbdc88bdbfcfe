"""ApiVersions, Metadata, DescribeCluster, CreateTopics, DeleteTopics, CreatePartitions and
DescribeConfigs handlers, in-process, at every served version."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from broker.broker_helpers import call
from onceflow.broker import dispatch
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.api_versions import ApiVersionsRequest
from onceflow.protocol.messages.create_partitions import CreatePartitionsRequest
from onceflow.protocol.messages.create_topics import CreateTopicsRequest
from onceflow.protocol.messages.delete_topics import DeleteTopicsRequest
from onceflow.protocol.messages.describe_cluster import DescribeClusterRequest
from onceflow.protocol.messages.describe_configs import DescribeConfigsRequest
from onceflow.protocol.messages.metadata import MetadataRequest

ZERO_UUID = uuid.UUID(int=0)


def run(state, api_key, version, request):
    return asyncio.run(call(state, api_key, version, request))


def versions(api_key):
    api = dispatch.APIS[int(api_key)]
    return range(api.min_version, api.max_version + 1)


@pytest.mark.parametrize("version", versions(ApiKey.API_VERSIONS))
def test_api_versions_lists_exactly_the_served_table(state, version):
    request = ApiVersionsRequest(client_software_name="test", client_software_version="1.0")
    response = run(state, ApiKey.API_VERSIONS, version, request)
    assert response.error_code == 0
    listed = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert listed == {int(key): (low, high) for key, (low, high, _) in dispatch.SUPPORTED.items()}
    assert listed[ApiKey.PRODUCE] == (3, 12)


def test_api_versions_rejects_bad_software_name(state):
    request = ApiVersionsRequest(client_software_name="bad name!", client_software_version="1")
    assert run(state, ApiKey.API_VERSIONS, 3, request).error_code == ErrorCode.INVALID_REQUEST


def metadata_request(names, allow=True):
    topics = (
        None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    )
    return MetadataRequest(topics=topics, allow_auto_topic_creation=allow)


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_every_version(state, version):
    state.logs.create_topic("existing", 2)
    names = ["existing", "fresh"]
    response = run(state, ApiKey.METADATA, version, metadata_request(names))
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (1, state.advertised.host, state.advertised.port)
    ]
    topics = {t.name: t for t in response.topics}
    assert topics["existing"].error_code == 0
    assert [p.partition_index for p in topics["existing"].partitions] == [0, 1]
    assert all(p.leader_id == 1 and p.isr_nodes == [1] for p in topics["existing"].partitions)
    assert topics["fresh"].error_code == 0 and len(topics["fresh"].partitions) == 1  # auto-created
    if version >= 1:
        assert response.controller_id == 1
    if version >= 2:
        assert response.cluster_id == state.cluster_id
    if version >= 10:
        assert topics["existing"].topic_id == state.logs.topic("existing").topic_id
    everything = run(state, ApiKey.METADATA, version, metadata_request(None if version else []))
    assert sorted(t.name for t in everything.topics) == ["existing", "fresh"]


def test_metadata_auto_create_disabled_and_invalid_names(state_factory):
    state = state_factory(**{"auto.create.topics.enable": False})
    response = run(state, ApiKey.METADATA, 12, metadata_request(["missing", "bad/name"]))
    codes = {t.name: t.error_code for t in response.topics}
    assert codes == {
        "missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
    assert state.logs.topic("missing") is None


def test_metadata_request_may_forbid_auto_create(state):
    response = run(state, ApiKey.METADATA, 9, metadata_request(["missing"], allow=False))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_by_topic_id(state):
    topic_id = state.logs.create_topic("t", 1).topic_id
    request = MetadataRequest(
        topics=[
            MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=None),
            MetadataRequest.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None),
        ],
        allow_auto_topic_creation=False,
    )
    response = run(state, ApiKey.METADATA, 12, request)
    assert response.topics[0].name == "t" and response.topics[0].error_code == 0
    assert response.topics[1].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_cluster_id_is_stable_across_restarts(state_factory):
    first = state_factory("d")
    cluster_id = first.cluster_id
    asyncio.run(first.close())
    second = state_factory("d")
    assert second.cluster_id == cluster_id and len(cluster_id) == 22


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLUSTER))
def test_describe_cluster(state, version):
    response = run(state, ApiKey.DESCRIBE_CLUSTER, version, DescribeClusterRequest())
    assert response.error_code == 0 and response.cluster_id == state.cluster_id
    assert response.controller_id == 1 and [b.broker_id for b in response.brokers] == [1]


@pytest.mark.parametrize("include_fenced", [False, True])
def test_describe_cluster_v2_lists_the_node_unfenced(state, include_fenced):
    # KIP-1073: kafka-cluster list-endpoints --include-fenced-brokers sends v2
    request = DescribeClusterRequest(include_fenced_brokers=include_fenced)
    response = run(state, ApiKey.DESCRIBE_CLUSTER, 2, request)
    assert response.error_code == 0
    assert [(b.broker_id, b.is_fenced) for b in response.brokers] == [(1, False)]


def create_request(*topics, validate_only=False):
    return CreateTopicsRequest(topics=list(topics), timeout_ms=1000, validate_only=validate_only)


def creatable(name, partitions=1, replication=-1, configs=None, assignments=()):
    topic = CreateTopicsRequest.CreatableTopic
    return topic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[
            topic.CreatableReplicaAssignment(partition_index=i, broker_ids=ids)
            for i, ids in enumerate(assignments)
        ],
        configs=[topic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
def test_create_topics(state, version):
    request = create_request(
        creatable("a", 3, 1, {"retention.ms": "1000"}),
        creatable("b", -1),
        creatable("c", 1, 3),
        creatable("d", 1, configs={"no.such.config": "1"}),
        creatable("e", 1, configs={"retention.ms": "soon"}),
        creatable("f", 0),
        creatable("bad name"),
        creatable("dup"),
        creatable("dup"),
        creatable("g", -1, -1, assignments=[[1], [1]]),
        creatable("h", -1, -1, assignments=[[2]]),
    )
    response = run(state, ApiKey.CREATE_TOPICS, version, request)
    codes = [(t.name, t.error_code) for t in response.topics]
    assert codes == [
        ("a", 0),
        ("b", 0),
        ("c", ErrorCode.INVALID_REPLICATION_FACTOR),
        ("d", ErrorCode.INVALID_CONFIG),
        ("e", ErrorCode.INVALID_CONFIG),
        ("f", ErrorCode.INVALID_PARTITIONS),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("dup", ErrorCode.INVALID_REQUEST),
        ("dup", ErrorCode.INVALID_REQUEST),
        ("g", 0),
        ("h", ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ]
    assert state.logs.topic("a").partitions == 3
    assert state.logs.topic("a").configs == {"retention.ms": "1000"}
    assert state.logs.topic("g").partitions == 2
    assert state.logs.topic("c") is None
    if version >= 5:
        a = response.topics[0]
        assert a.num_partitions == 3 and a.replication_factor == 1
        configs = {c.name: c for c in a.configs}
        assert (
            configs["retention.ms"].value == "1000" and configs["retention.ms"].config_source == 1
        )
    if version >= 7:
        assert response.topics[0].topic_id == state.logs.topic("a").topic_id
    again = run(state, ApiKey.CREATE_TOPICS, version, create_request(creatable("a")))
    assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_create_topics_validate_only_creates_nothing(state):
    response = run(
        state, ApiKey.CREATE_TOPICS, 7, create_request(creatable("v", 2), validate_only=True)
    )
    assert response.topics[0].error_code == 0
    assert state.logs.topic("v") is None


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_TOPICS))
def test_delete_topics(state, version):
    state.logs.create_topic("x", 1)
    y_id = state.logs.create_topic("y", 1).topic_id
    if version >= 6:
        state_cls = DeleteTopicsRequest.DeleteTopicState
        request = DeleteTopicsRequest(
            topics=[
                state_cls(name="x", topic_id=ZERO_UUID),
                state_cls(name=None, topic_id=y_id),
                state_cls(name="nope", topic_id=ZERO_UUID),
                state_cls(name=None, topic_id=uuid.uuid4()),
            ],
            timeout_ms=1000,
        )
        expected = [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID]
    else:
        request = DeleteTopicsRequest(topic_names=["x", "y", "nope"], timeout_ms=1000)
        expected = [0, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    response = run(state, ApiKey.DELETE_TOPICS, version, request)
    assert [r.error_code for r in response.responses] == expected
    assert state.logs.topic("x") is None and state.logs.topic("y") is None
    if version >= 6:
        assert response.responses[1].name == "y"


def test_delete_topics_disabled(state_factory):
    state = state_factory(**{"delete.topic.enable": False})
    state.logs.create_topic("x", 1)
    response = run(
        state, ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=["x"], timeout_ms=1)
    )
    assert response.responses[0].error_code == ErrorCode.TOPIC_DELETION_DISABLED
    assert state.logs.topic("x") is not None


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_PARTITIONS))
def test_create_partitions(state, version):
    state.logs.create_topic("t", 1)
    state.logs.create_topic("u", 2)
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    assignment = topic.CreatePartitionsAssignment
    request = CreatePartitionsRequest(
        topics=[
            topic(name="t", count=3, assignments=None),
            topic(name="u", count=1, assignments=None),
            topic(name="nope", count=2, assignments=None),
            topic(name="u", count=5, assignments=None),
        ],
        timeout_ms=1000,
        validate_only=False,
    )
    response = run(state, ApiKey.CREATE_PARTITIONS, version, request)
    assert [(r.name, r.error_code) for r in response.results] == [
        ("t", 0),
        ("u", ErrorCode.INVALID_REQUEST),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("u", ErrorCode.INVALID_REQUEST),
    ]
    assert state.logs.topic("t").partitions == 3
    assert state.get_log("t", 2) is not None
    bad = CreatePartitionsRequest(
        topics=[topic(name="t", count=4, assignments=[assignment(broker_ids=[7])])],
        timeout_ms=1000,
        validate_only=False,
    )
    result = run(state, ApiKey.CREATE_PARTITIONS, version, bad).results[0]
    assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    shrink = CreatePartitionsRequest(
        topics=[topic(name="t", count=2, assignments=None)], timeout_ms=1000, validate_only=False
    )
    assert run(state, ApiKey.CREATE_PARTITIONS, version, shrink).results[0].error_code == (
        ErrorCode.INVALID_PARTITIONS
    )


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs(state, version):
    state.logs.create_topic("t", 1, {"retention.ms": "5000"})
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            resource(resource_type=2, resource_name="t", configuration_keys=None),
            resource(resource_type=2, resource_name="t", configuration_keys=["segment.bytes"]),
            resource(resource_type=4, resource_name="1", configuration_keys=None),
            resource(resource_type=4, resource_name="9", configuration_keys=None),
            resource(resource_type=2, resource_name="nope", configuration_keys=None),
        ],
        include_synonyms=True,
        include_documentation=version >= 3,
    )
    response = run(state, ApiKey.DESCRIBE_CONFIGS, version, request)
    codes = [r.error_code for r in response.results]
    assert codes == [0, 0, 0, ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    topic = {c.name: c for c in response.results[0].configs}
    assert topic["retention.ms"].value == "5000" and topic["retention.ms"].config_source == 1
    assert topic["segment.bytes"].config_source == 5
    assert [s.name for s in topic["retention.ms"].synonyms] == [
        "retention.ms",
        "log.retention.hours",
    ]
    assert [c.name for c in response.results[1].configs] == ["segment.bytes"]
    broker = {c.name: c for c in response.results[2].configs}
    assert broker["num.partitions"].value == "1"
    assert broker["auto.create.topics.enable"].value == "true"
    assert broker["log.dirs"].config_source == 4  # set explicitly by the test config


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_topic_id_before_v12_is_invalid_request(state, version):
    # Kafka serves topic ids in Metadata requests from v12 only: every topic of the request
    # is answered INVALID_REQUEST (a null name as ""), and nothing is auto-created
    topic_id = state.logs.create_topic("t", 1).topic_id
    request = MetadataRequest(
        topics=[
            MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name=None),
            MetadataRequest.MetadataRequestTopic(topic_id=ZERO_UUID, name="new"),
        ],
        allow_auto_topic_creation=True,
    )
    response = run(state, ApiKey.METADATA, version, request)
    answers = [(t.name, t.topic_id, t.error_code, t.partitions) for t in response.topics]
    assert answers == [
        ("", topic_id, ErrorCode.INVALID_REQUEST, []),
        ("new", ZERO_UUID, ErrorCode.INVALID_REQUEST, []),
    ]
    assert state.logs.topic("new") is None
