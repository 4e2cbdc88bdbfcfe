"""Apache Kafka's own admin tools against the onceflow broker.

Each test runs the classes behind `kafka-transactions.sh`, `kafka-configs.sh` and
`kafka-acls.sh` (support.kafka_tools) and checks what they print, and where it matters what the
broker then holds, through confluent-kafka. One broker serves the module (`node`,
tests/interop/conftest.py: no authorizer, so ACL commands get SECURITY_DISABLED); kafka-acls
itself runs against a second broker with Kafka's StandardAuthorizer. Every test uses its own
topics, users and transactional ids. What onceflow does not serve (client quotas, group
configs) must fail the way Kafka's tools report an unsupported feature.
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from support.broker import BrokerProcess
from support.hung_txn import HUNG_PRODUCER_ID, hang_a_transaction, last_stable_offset
from support.kafka_tools import (
    ACLS,
    CONFIGS,
    TRANSACTIONS,
    tab_rows,
    tool,
    watermarks,
)

from interop.workload import create_topic

pytestmark = pytest.mark.kafka


# -- kafka-transactions ------------------------------------------------------------------------


def transactions(broker: BrokerProcess, *args: str) -> list[dict[str, str]]:
    return tab_rows(tool(broker, TRANSACTIONS, *args).check().stdout)


def test_transactions_list_describe_and_describe_producers_of_a_live_transaction(node):
    topic, txn_id = "tools-txn", "tools-txn-id"
    create_topic(node.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 45000})  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"%d" % i, partition=1)
    assert producer.flush(30) == 0
    try:
        listed = transactions(node, "list", "--transactional-id-pattern", "tools-txn-.*")
        (row,) = listed
        assert (row["TransactionalId"], row["Coordinator"], row["TransactionState"]) == (
            txn_id, "1", "Ongoing",
        )  # fmt: skip
        producer_id = row["ProducerId"]
        (row,) = transactions(node, "describe", "--transactional-id", txn_id)
        assert (row["ProducerId"], row["ProducerEpoch"], row["TransactionState"]) == (
            producer_id, "0", "Ongoing",
        )  # fmt: skip
        assert (row["TransactionTimeoutMs"], row["TopicPartitions"]) == ("45000", f"{topic}-1")
        (row,) = transactions(node, "describe-producers", "--topic", topic, "--partition", "1")
        assert (row["ProducerId"], row["LastSequence"], row["CurrentTransactionStartOffset"]) == (
            producer_id, "2", "0",
        )  # fmt: skip
        # an open transaction its coordinator knows is not hanging
        hanging = transactions(node, "find-hanging", "--topic", topic,
                               "--max-transaction-timeout", "0")  # fmt: skip
        assert hanging == []
    finally:
        producer.commit_transaction(30)
    (row,) = transactions(node, "describe", "--transactional-id", txn_id)
    assert (row["TransactionState"], row["TopicPartitions"]) == ("CompleteCommit", "")
    (row,) = transactions(node, "describe-producers", "--topic", topic, "--partition", "1")
    assert row["CurrentTransactionStartOffset"] == "None"
    assert transactions(node, "list", "--transactional-id-pattern", "nothing-.*") == []

    run = tool(node, TRANSACTIONS, "describe", "--transactional-id", "tools-no-such-id")
    assert run.returncode == 1
    assert "failed because the ID could not be found" in run.stdout + run.stderr


def test_transactions_find_hanging_and_abort(node):
    topic = "tools-hung"
    create_topic(node.bootstrap, topic, 1)
    hang_a_transaction(node.bootstrap, topic)
    assert last_stable_offset(node.bootstrap, topic) == 1
    now = ("--max-transaction-timeout", "0")
    (row,) = transactions(node, "find-hanging", "--broker-id", "1", *now)
    assert (row["Topic"], row["Partition"], row["ProducerId"], row["StartOffset"]) == (
        topic, "0", str(HUNG_PRODUCER_ID), "1",
    )  # fmt: skip
    # hanging only once open longer than the longest transaction timeout (15 minutes default)
    assert transactions(node, "find-hanging", "--broker-id", "1") == []

    wrong = tool(node, TRANSACTIONS, "abort", "--topic", topic, "--partition", "0",
                 "--start-offset", "0")  # fmt: skip
    assert wrong.returncode == 1
    assert "Could not find any open transactions starting at offset 0" in wrong.stderr
    tool(node, TRANSACTIONS, "abort", "--topic", topic, "--partition", "0",
         "--start-offset", "1").check()  # fmt: skip
    assert last_stable_offset(node.bootstrap, topic) == 3  # past the abort marker
    assert transactions(node, "find-hanging", "--broker-id", "1", *now) == []
    (row,) = transactions(node, "describe-producers", "--topic", topic, "--partition", "0")
    assert (row["ProducerId"], row["CurrentTransactionStartOffset"]) == (
        str(HUNG_PRODUCER_ID), "None",
    )  # fmt: skip


def test_transactions_force_terminate_fences_and_aborts(node):
    topic, txn_id = "tools-fence", "tools-fence-id"
    create_topic(node.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"doomed", partition=0)
    assert producer.flush(30) == 0
    tool(node, TRANSACTIONS, "forceTerminateTransaction", "--transactionalId", txn_id).check()
    (row,) = transactions(node, "describe", "--transactional-id", txn_id)
    assert (row["TransactionState"], row["ProducerEpoch"]) == ("Empty", "2")  # abort, then fence
    assert last_stable_offset(node.bootstrap, topic) == watermarks(node, topic, 0)[1]
    with pytest.raises(Exception, match="(?i)fenced"):
        producer.commit_transaction(30)


# -- kafka-configs -----------------------------------------------------------------------------


def described_configs(out: str) -> dict[str, str]:
    """`  key=value sensitive=... synonyms={...}` lines of kafka-configs --describe."""
    return dict(re.findall(r"^  ([^=\s]+)=(\S*) sensitive=", out, re.MULTILINE))


def test_kafka_configs_topic_broker_and_user(node):
    topic = "tools-configs"
    create_topic(node.bootstrap, topic, 1)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    changes = "retention.ms=5000,max.message.bytes=20000"
    out = tool(node, CONFIGS, *entity, "--alter", "--add-config", changes).check().stdout
    assert out.strip() == f"Completed updating config for topic {topic}."
    out = tool(node, CONFIGS, *entity, "--describe").check().stdout
    assert described_configs(out) == {"retention.ms": "5000", "max.message.bytes": "20000"}
    assert "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000, " in out
    tool(node, CONFIGS, *entity, "--alter", "--delete-config", "retention.ms").check()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    assert entries["max.message.bytes"].value == "20000"
    assert entries["retention.ms"].is_default

    for bad, error in {
        "retention.ms=abc": "InvalidConfigurationException: invalid value for retention.ms",
        "no.such.key=1": "InvalidConfigurationException: Unknown topic config name: no.such.key",
    }.items():
        run = tool(node, CONFIGS, *entity, "--alter", "--add-config", bad)
        assert run.returncode == 1 and error in run.stdout + run.stderr

    broker_1 = ("--entity-type", "brokers", "--entity-name", "1")
    tool(node, CONFIGS, *broker_1, "--alter", "--add-config", "log.cleaner.threads=2").check()
    out = tool(node, CONFIGS, *broker_1, "--describe").check().stdout
    assert described_configs(out) == {"log.cleaner.threads": "2"}
    assert "DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in out
    tool(node, CONFIGS, *broker_1, "--alter", "--delete-config", "log.cleaner.threads").check()
    assert described_configs(tool(node, CONFIGS, *broker_1, "--describe").check().stdout) == {}
    out = tool(node, CONFIGS, *broker_1, "--describe", "--all").check().stdout
    assert described_configs(out)["default.replication.factor"] == "1"

    user = ("--entity-type", "users", "--entity-name", "tools-alice")
    out = tool(node, CONFIGS, *user, "--alter", "--add-config",
               "SCRAM-SHA-256=[iterations=8192,password=alice-secret]").check().stdout  # fmt: skip
    assert out.strip() == "Completed updating config for user tools-alice."
    described = admin.describe_user_scram_credentials(["tools-alice"])["tools-alice"].result(10)
    ((mechanism, iterations),) = [
        (info.mechanism.name, info.iterations) for info in described.scram_credential_infos
    ]
    assert (mechanism, iterations) == ("SCRAM_SHA_256", 8192)


def test_kafka_configs_unsupported_entities_fail_as_on_kafka(node):
    # client quotas are not served (DescribeClientQuotas is not advertised)
    run = tool(node, CONFIGS, "--entity-type", "users", "--describe")
    assert run.returncode == 1
    assert "UnsupportedVersionException: The node does not support DESCRIBE_CLIENT_QUOTAS" in (
        run.stdout + run.stderr
    )
    # group configs belong to the KIP-848 group protocols onceflow does not serve
    run = tool(node, CONFIGS, "--entity-type", "groups", "--entity-name", "g", "--describe")
    assert run.returncode == 1
    assert "InvalidRequestException: Unsupported resource type: GROUP" in run.stdout + run.stderr


# -- kafka-acls --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory):
    config = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    process = BrokerProcess(tmp_path_factory.mktemp("acls") / "data", config)
    yield process
    process.stop()


ACL_LINE = re.compile(r"\(principal=(\S+), host=(\S+), operation=(\w+), permissionType=(\w+)\)")
RESOURCE_LINE = re.compile(r"resourceType=(\w+), name=(\S+), patternType=(\w+)\)`:")


def acl_listing(out: str) -> set[tuple[str, ...]]:
    """(resource type, name, pattern type, principal, host, operation, permission) listed."""
    found, resource = set(), None
    for line in out.splitlines():
        if match := RESOURCE_LINE.search(line):
            resource = match.groups()
        elif (match := ACL_LINE.search(line)) and resource is not None:
            found.add((*resource, *match.groups()))
    return found


def test_kafka_acls_add_list_remove(acl_broker):
    def acls(*args: str):
        return tool(acl_broker, ACLS, *args).check().stdout

    acls("--add", "--allow-principal", "User:alice", "--operation", "Read",
         "--operation", "Write", "--topic", "orders")  # fmt: skip
    acls("--add", "--allow-principal", "User:bob", "--consumer", "--topic", "pre-",
         "--resource-pattern-type", "prefixed", "--group", "bobs")  # fmt: skip
    acls("--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9",
         "--operation", "All", "--cluster")  # fmt: skip
    assert acl_listing(acls("--list")) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "WRITE", "ALLOW"),
        ("TOPIC", "pre-", "PREFIXED", "User:bob", "*", "READ", "ALLOW"),
        ("TOPIC", "pre-", "PREFIXED", "User:bob", "*", "DESCRIBE", "ALLOW"),
        ("GROUP", "bobs", "PREFIXED", "User:bob", "*", "READ", "ALLOW"),
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:eve", "10.0.0.9", "ALL", "DENY"),
    }
    assert {acl[:4] for acl in acl_listing(acls("--list", "--principal", "User:bob"))} == {
        ("TOPIC", "pre-", "PREFIXED", "User:bob"),
        ("GROUP", "bobs", "PREFIXED", "User:bob"),
    }
    acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write",
         "--topic", "orders")  # fmt: skip
    # --topic matches the literal ACLs on the name and the prefixed ones that cover it
    assert acl_listing(acls("--list", "--topic", "orders")) == {
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
    }
    listed = acls("--list", "--topic", "pre-x", "--resource-pattern-type", "match")
    assert {acl[:3] for acl in acl_listing(listed)} == {("TOPIC", "pre-", "PREFIXED")}


def test_kafka_acls_without_an_authorizer_is_security_disabled(node):
    run = tool(node, ACLS, "--list")
    assert run.returncode == 1
    assert "SecurityDisabledException" in run.stdout + run.stderr
