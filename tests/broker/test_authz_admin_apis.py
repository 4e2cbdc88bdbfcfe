"""Authorization of the topic, config and tooling APIs (issue 10): a denied principal gets
Kafka's error and topics, partitions, records and configs are as they were; an allowed one
succeeds."""

from __future__ import annotations

import asyncio

from broker.authz_helpers import (
    ALICE,
    ANONYMOUS_ADMIN,
    MALLORY,
    creation,
    grant,
    open_authz_state,
)
from broker.broker_helpers import call, make_batch, produce_request
from broker.test_admin_handlers import creatable, create_request
from broker.test_broker_txn_handlers import add_partitions, find_txn, init
from broker.test_delete_records import delete_request
from onceflow.broker.authorized_ops import operations_in
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.alter_configs import AlterConfigsRequest
from onceflow.protocol.messages.create_partitions import CreatePartitionsRequest
from onceflow.protocol.messages.delete_topics import DeleteTopicsRequest
from onceflow.protocol.messages.describe_cluster import DescribeClusterRequest
from onceflow.protocol.messages.describe_configs import DescribeConfigsRequest
from onceflow.protocol.messages.describe_producers import DescribeProducersRequest
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest
from onceflow.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from onceflow.protocol.messages.list_offsets import ListOffsetsRequest
from onceflow.protocol.messages.list_transactions import ListTransactionsRequest
from onceflow.security.acl import AclOperation, ResourceType

_Op = AclOperation
_R = ResourceType
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TOPIC, BROKER = 2, 4


def open_admin_state(tmp_path, **overrides):
    state = open_authz_state(tmp_path / "data", **ANONYMOUS_ADMIN, **overrides)
    for name in ("t", "secret"):
        assert state.logs.create_topic(name, 1).error == ErrorCode.NONE
    return state


def as_(state, principal, api_key, version, request):
    return asyncio.run(call(state, api_key, version, request, principal=principal))


def test_list_offsets_needs_describe(tmp_path):
    state = open_admin_state(tmp_path)
    grant(state, creation(_R.TOPIC, "t", _Op.DESCRIBE))
    topic = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            topic(name=n, partitions=[topic.ListOffsetsPartition(partition_index=0, timestamp=-1)])
            for n in ("t", "secret")
        ],
    )
    response = as_(state, ALICE, ApiKey.LIST_OFFSETS, 7, request)
    errors = {t.name: (t.partitions[0].error_code, t.partitions[0].offset) for t in response.topics}
    assert errors == {"t": (0, 0), "secret": (TOPIC_DENIED, -1)}
    asyncio.run(state.close())


def test_create_topics_needs_create_on_the_cluster_or_the_topic(tmp_path):
    state = open_admin_state(tmp_path)
    grant(state, creation(_R.TOPIC, "mine", _Op.CREATE))
    request = create_request(creatable("mine"), creatable("theirs"))
    response = as_(state, ALICE, ApiKey.CREATE_TOPICS, 7, request)
    results = {r.name: r for r in response.topics}
    assert results["mine"].error_code == ErrorCode.NONE
    # no DESCRIBE_CONFIGS: created, but the details are withheld
    assert results["mine"].topic_config_error_code == TOPIC_DENIED
    assert (results["mine"].configs, results["mine"].num_partitions) == (None, -1)
    assert results["theirs"].error_code == TOPIC_DENIED
    assert results["theirs"].error_message == "Authorization failed."
    assert state.logs.topic("theirs") is None
    grant(
        state,
        creation(_R.CLUSTER, "kafka-cluster", _Op.CREATE),
        creation(_R.TOPIC, "theirs", _Op.DESCRIBE_CONFIGS),
    )
    response = as_(state, ALICE, ApiKey.CREATE_TOPICS, 7, create_request(creatable("theirs")))
    [result] = response.topics
    assert (result.error_code, result.topic_config_error_code, result.num_partitions) == (0, 0, 1)
    assert state.logs.topic("theirs") is not None
    asyncio.run(state.close())


def test_delete_topics_needs_delete(tmp_path):
    state = open_admin_state(tmp_path)
    assert state.logs.create_topic("visible", 1).error == ErrorCode.NONE
    grant(
        state,
        creation(_R.TOPIC, "t", _Op.DELETE),
        creation(_R.TOPIC, "visible", _Op.READ),
        creation(_R.TOPIC, "ghost", _Op.DESCRIBE),
    )
    request = DeleteTopicsRequest(topic_names=["t", "secret", "visible", "ghost"], timeout_ms=1)
    response = as_(state, ALICE, ApiKey.DELETE_TOPICS, 5, request)
    assert {r.name: r.error_code for r in response.responses} == {
        "t": 0,
        "secret": TOPIC_DENIED,
        "visible": TOPIC_DENIED,
        "ghost": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # may DESCRIBE: told it is missing
    }
    secret_id = state.logs.topic("secret").topic_id
    state_cls = DeleteTopicsRequest.DeleteTopicState
    request = DeleteTopicsRequest(topics=[state_cls(name=None, topic_id=secret_id)], timeout_ms=1)
    [result] = as_(state, ALICE, ApiKey.DELETE_TOPICS, 6, request).responses
    assert (result.name, result.topic_id, result.error_code) == (None, secret_id, TOPIC_DENIED)
    assert state.logs.topic("t") is None
    assert state.logs.topic("secret") is not None and state.logs.topic("visible") is not None
    asyncio.run(state.close())


def test_delete_records_and_create_partitions(tmp_path):
    state = open_admin_state(tmp_path)
    for _ in range(3):
        request = produce_request("t", {0: make_batch([b"v"])})
        asyncio.run(call(state, ApiKey.PRODUCE, 9, request))
    response = as_(state, MALLORY, ApiKey.DELETE_RECORDS, 2, delete_request({("t", 0): 2}))
    assert response.topics[0].partitions[0].error_code == TOPIC_DENIED
    assert state.get_log("t", 0).log_start_offset == 0
    grow = CreatePartitionsRequest(
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=3, assignments=None)],
        timeout_ms=1,
        validate_only=False,
    )
    [result] = as_(state, MALLORY, ApiKey.CREATE_PARTITIONS, 3, grow).results
    assert result.error_code == TOPIC_DENIED
    assert state.logs.topic("t").partitions == 1
    grant(
        state,
        creation(_R.TOPIC, "t", _Op.DELETE, principal=MALLORY),
        creation(_R.TOPIC, "t", _Op.ALTER, principal=MALLORY),
    )
    response = as_(state, MALLORY, ApiKey.DELETE_RECORDS, 2, delete_request({("t", 0): 2}))
    assert response.topics[0].partitions[0].low_watermark == 2
    assert as_(state, MALLORY, ApiKey.CREATE_PARTITIONS, 3, grow).results[0].error_code == 0
    assert state.logs.topic("t").partitions == 3
    asyncio.run(state.close())


def describe_configs(state, principal, resources):
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        resources=[
            resource(resource_type=k, resource_name=n, configuration_keys=None)
            for k, n in resources
        ],
        include_synonyms=False,
    )
    response = as_(state, principal, ApiKey.DESCRIBE_CONFIGS, 4, request)
    return [(r.error_code, len(r.configs) > 0) for r in response.results]


def test_config_apis_need_describe_configs_and_alter_configs(tmp_path):
    state = open_admin_state(tmp_path)
    node = str(state.node_id)
    grant(state, creation(_R.TOPIC, "t", _Op.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
    resources = [(TOPIC, "t"), (TOPIC, "secret"), (BROKER, node)]
    assert describe_configs(state, ALICE, resources) == [
        (0, True),
        (TOPIC_DENIED, False),
        (CLUSTER_DENIED, False),
    ]
    alter = AlterConfigsRequest.AlterConfigsResource
    setting = [alter.AlterableConfig(name="retention.ms", value="1000")]
    request = AlterConfigsRequest(
        resources=[
            alter(resource_type=k, resource_name=n, configs=setting if k == TOPIC else [])
            for k, n in resources
        ],
        validate_only=False,
    )
    response = as_(state, ALICE, ApiKey.ALTER_CONFIGS, 2, request)
    assert [r.error_code for r in response.responses] == [0, TOPIC_DENIED, CLUSTER_DENIED]
    incremental = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(
        resources=[
            incremental(
                resource_type=TOPIC,
                resource_name=name,
                configs=[
                    incremental.AlterableConfig(
                        name="retention.ms", config_operation=0, value="2000"
                    )
                ],
            )
            for name in ("t", "secret")
        ],
        validate_only=False,
    )
    response = as_(state, ALICE, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    assert [r.error_code for r in response.responses] == [0, TOPIC_DENIED]
    assert state.logs.topic("t").configs == {"retention.ms": "2000"}
    assert state.logs.topic("secret").configs == {}
    asyncio.run(state.close())


def test_describe_cluster_operations_need_describe(tmp_path):
    state = open_admin_state(tmp_path)
    grant(state, creation(_R.CLUSTER, "kafka-cluster", _Op.CREATE))
    request = DescribeClusterRequest(include_cluster_authorized_operations=True)
    response = as_(state, ALICE, ApiKey.DESCRIBE_CLUSTER, 1, request)
    assert (response.error_code, response.cluster_authorized_operations) == (0, 0)
    grant(state, creation(_R.CLUSTER, "kafka-cluster", _Op.DESCRIBE))
    response = as_(state, ALICE, ApiKey.DESCRIBE_CLUSTER, 1, request)
    assert operations_in(response.cluster_authorized_operations) == {_Op.CREATE, _Op.DESCRIBE}
    asyncio.run(state.close())


def test_tooling_apis(tmp_path):
    state = open_admin_state(tmp_path, **{"transaction.state.log.num.partitions": 1})

    async def open_transactions():
        for tid in ("tx", "other"):
            assert (await find_txn(state, tid)).error_code == 0
            error, pid, epoch = await init(state, tid)
            assert error == 0
            for topic in ("t", "secret"):
                await add_partitions(state, tid, pid, epoch, [0], topic=topic)

    asyncio.run(open_transactions())
    grant(
        state,
        creation(_R.TOPIC, "t", _Op.READ),
        creation(_R.TRANSACTIONAL_ID, "tx", _Op.DESCRIBE),
    )
    topic = DescribeProducersRequest.TopicRequest
    request = DescribeProducersRequest(
        topics=[topic(name=n, partition_indexes=[0]) for n in ("t", "secret")]
    )
    response = as_(state, ALICE, ApiKey.DESCRIBE_PRODUCERS, 0, request)
    assert [t.partitions[0].error_code for t in response.topics] == [0, TOPIC_DENIED]
    request = DescribeTransactionsRequest(transactional_ids=["tx", "other"])
    response = as_(state, ALICE, ApiKey.DESCRIBE_TRANSACTIONS, 0, request)
    tx, other = response.transaction_states
    assert (tx.error_code, [t.topic for t in tx.topics]) == (0, ["t"])  # secret left out
    assert other.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    response = as_(state, ALICE, ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest())
    assert [t.transactional_id for t in response.transaction_states] == ["tx"]
    response = as_(state, MALLORY, ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest())
    assert (response.error_code, response.transaction_states) == (0, [])
    asyncio.run(state.close())
