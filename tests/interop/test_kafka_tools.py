"""Apache Kafka's own command-line tools against the onceflow broker.

Each test runs the classes behind `kafka-topics.sh`, `kafka-console-producer.sh`,
`kafka-console-consumer.sh`, `kafka-consumer-groups.sh`, `kafka-transactions.sh`,
`kafka-configs.sh`, `kafka-acls.sh`, `kafka-delete-records.sh`, `kafka-get-offsets.sh` and
`kafka-verifiable-producer/consumer.sh` (support.kafka_tools) and checks what they print, and
where it matters what the broker then holds, through confluent-kafka. One broker serves the
module (no authorizer, so ACL commands get SECURITY_DISABLED; kafka-acls itself runs against a
second broker with Kafka's StandardAuthorizer); every test uses its own topics, groups and
transactional ids. What onceflow does not serve (client quotas, group configs, the KIP-848
consumer protocol) must fail the way Kafka's tools report an unsupported feature.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from support.broker import BrokerProcess
from support.hung_txn import HUNG_PRODUCER_ID, hang_a_transaction, last_stable_offset
from support.kafka_tools import (
    ACLS,
    CONFIGS,
    CONSOLE_CONSUMER,
    CONSOLE_PRODUCER,
    CONSUMER_GROUPS,
    DELETE_RECORDS,
    GET_OFFSETS,
    TOPICS,
    TRANSACTIONS,
    VERIFIABLE_CONSUMER,
    VERIFIABLE_PRODUCER,
    column_rows,
    run_tool,
    tab_rows,
)
from support.peers import FAST_GROUP_BROKER

from interop.workload import create_topic

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    config = {**FAST_GROUP_BROKER, "onceflow.admin.allow.write.txn.markers": True}
    process = BrokerProcess(tmp_path_factory.mktemp("tools") / "data", config)
    yield process
    process.stop()


def tool(broker: BrokerProcess, main_class: str, *args: str, stdin: str | None = None):
    """Run a tool with `--bootstrap-server` pointing at `broker` (not yet checked)."""
    return run_tool(main_class, "--bootstrap-server", broker.bootstrap, *args, stdin=stdin)


def produce(broker: BrokerProcess, topic: str, per_partition: dict[int, int]) -> None:
    """`count` records `p-i` to each partition `p`, acks=all."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def watermarks(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


# -- kafka-topics ------------------------------------------------------------------------------


def describe_topics(broker: BrokerProcess, *args: str) -> list[dict[str, str]]:
    """kafka-topics --describe: each topic line and partition line as a `key: value` map."""
    out = tool(broker, TOPICS, "--describe", *args).check().stdout
    lines = []
    for line in out.splitlines():
        cells = [cell.partition(":") for cell in line.strip("\n").split("\t") if cell]
        lines.append({key.strip(): value.strip() for key, _, value in cells})
    return lines


def describe_topic(broker: BrokerProcess, topic: str) -> tuple[dict[str, str], list[dict]]:
    """The topic line and its partition lines."""
    summary, *partitions = describe_topics(broker, "--topic", topic)
    return summary, partitions


def test_kafka_topics_create_list_describe_alter_delete(broker):
    topic = "tools-topic"
    created = tool(broker, TOPICS, "--create", "--topic", topic, "--partitions", "3",
                   "--config", "retention.ms=123456").check()  # fmt: skip
    assert created.stdout.strip() == f"Created topic {topic}."
    assert topic in tool(broker, TOPICS, "--list").check().stdout.split()

    summary, partitions = describe_topic(broker, topic)
    assert (summary["Topic"], summary["PartitionCount"], summary["ReplicationFactor"]) == (
        topic, "3", "1",
    )  # fmt: skip
    assert summary["Configs"] == "retention.ms=123456"
    # DescribeTopicPartitions (KIP-966) answers: empty eligible-leader-replica lists, as a
    # Kafka 4.4 node prints them (a Metadata fallback would print "N/A")
    assert [
        (p["Partition"], p["Leader"], p["Replicas"], p["Isr"], p["Elr"], p["LastKnownElr"])
        for p in partitions
    ] == [(str(i), "1", "1", "1", "", "") for i in range(3)]

    tool(broker, TOPICS, "--alter", "--topic", topic, "--partitions", "5").check()
    create_topic(broker.bootstrap, f"{topic}-2", 2)
    # two partitions per answer: the tool follows the cursor across both topics
    paged = describe_topics(broker, "--topic", f"{topic}.*", "--partition-size-limit-per-response",
                            "2")  # fmt: skip
    assert [(line["Topic"], line.get("Partition")) for line in paged] == [
        (topic, None), *((topic, str(p)) for p in range(5)),
        (f"{topic}-2", None), (f"{topic}-2", "0"), (f"{topic}-2", "1"),
    ]  # fmt: skip
    assert paged[0]["PartitionCount"] == "5"

    refusals = {
        ("--create", "--topic", topic): "TopicExistsException: Topic 'tools-topic' already exists",
        ("--create", "--topic", "tools-rf3", "--replication-factor", "3"):
            "InvalidReplicationFactorException",
        ("--alter", "--topic", topic, "--partitions", "2"):
            "InvalidPartitionsException: Topic currently has 5 partitions, 2 would not be an "
            "increase",
        ("--create", "--topic", "bad/name"): "InvalidTopicException",
    }  # fmt: skip
    for args, error in refusals.items():
        run = tool(broker, TOPICS, *args)
        assert run.returncode == 1 and error in run.stdout + run.stderr, (args, run)

    assert tool(broker, TOPICS, "--delete", "--topic", topic).check().returncode == 0
    assert topic not in tool(broker, TOPICS, "--list").check().stdout.split()


# -- kafka-console-producer / kafka-console-consumer -----------------------------------------


def test_console_producer_then_console_consumer_read_committed(broker):
    topic, group = "tools-console", "tools-console-group"
    create_topic(broker.bootstrap, topic, 2)
    lines = [f"key{i % 7}:value {i}" for i in range(40)]
    tool(broker, CONSOLE_PRODUCER, "--topic", topic, "--reader-property", "parse.key=true",
         "--reader-property", "key.separator=:", stdin="\n".join(lines) + "\n").check()  # fmt: skip

    run = tool(broker, CONSOLE_CONSUMER, "--topic", topic, "--from-beginning", "--group", group,
               "--max-messages", "40", "--isolation-level", "read_committed",
               "--formatter-property", "print.key=true",
               "--formatter-property", "print.partition=true",
               "--formatter-property", "print.offset=true").check()  # fmt: skip
    assert "Processed a total of 40 messages" in run.stderr
    consumed = []
    for line in run.stdout.splitlines():
        partition, offset, key, value = line.split("\t")
        consumed.append((int(partition.removeprefix("Partition:")),
                         int(offset.removeprefix("Offset:")), key, value))  # fmt: skip
    assert sorted(f"{key}:{value}" for *_, key, value in consumed) == sorted(lines)
    partition_of = {}
    for partition in (0, 1):
        mine = [c for c in consumed if c[0] == partition]
        assert [c[1] for c in mine] == list(range(len(mine)))  # in offset order, no gaps
        values = [int(c[3].split()[1]) for c in mine]
        assert values == sorted(values)  # the producer's order within a partition
        partition_of.update((c[2], partition) for c in mine)
    # one partition per key (Kafka's murmur2 partitioner on the producer side)
    assert len(partition_of) == 7
    assert all(sum(1 for c in consumed if c[2] == k and c[0] != p) == 0
               for k, p in partition_of.items())  # fmt: skip

    # the console consumer committed its position: kafka-consumer-groups shows no lag
    rows = column_rows(tool(broker, CONSUMER_GROUPS, "--describe", "--group", group).stdout)
    assert {(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in rows} == {
        (str(p), str(sum(1 for c in consumed if c[0] == p)), "0") for p in (0, 1)
    }


# -- kafka-consumer-groups ---------------------------------------------------------------------


def group_offsets(broker: BrokerProcess, group: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) from kafka-consumer-groups --describe."""
    out = tool(broker, CONSUMER_GROUPS, "--describe", "--group", group).check().stdout
    return {
        int(r["PARTITION"]): (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"], r["LAG"])
        for r in column_rows(out)
    }


def reset(broker: BrokerProcess, group: str, *args: str) -> dict[int, str]:
    """kafka-consumer-groups --reset-offsets: partition -> NEW-OFFSET as printed."""
    out = tool(broker, CONSUMER_GROUPS, "--reset-offsets", "--group", group, *args).check().stdout
    return {int(r["PARTITION"]): r["NEW-OFFSET"] for r in column_rows(out)}


def test_consumer_groups_members_lag_and_reset_offsets(broker):
    topic, group = "tools-groups", "tools-groups-group"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker, topic, {0: 10, 1: 10})
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                       "client.id": "tools-member", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        member.subscribe([topic])
        while len(member.assignment()) < 2:
            member.poll(0.2)
        member.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 10)],
                      asynchronous=False)  # fmt: skip
        out = tool(broker, CONSUMER_GROUPS, "--describe", "--group", group, "--members").stdout
        (row,) = column_rows(out)
        assert (row["CLIENT-ID"], row["#PARTITIONS"]) == ("tools-member", "2")
        out = tool(broker, CONSUMER_GROUPS, "--describe", "--group", group, "--state").stdout
        (row,) = column_rows(out)
        assert (row["STATE"], row["#MEMBERS"], row["ASSIGNMENT-STRATEGY"]) == ("Stable", "1",
                                                                              "range")  # fmt: skip
        run = tool(broker, CONSUMER_GROUPS, "--reset-offsets", "--group", group, "--all-topics",
                   "--to-earliest", "--execute")  # fmt: skip
        assert "can only be reset if the group 'tools-groups-group' is inactive" in run.stdout
        assert group_offsets(broker, group)[0] == ("4", "10", "6")  # unchanged
    finally:
        member.close()

    assert group_offsets(broker, group) == {0: ("4", "10", "6"), 1: ("10", "10", "0")}
    everything = ("--all-topics",)
    assert reset(broker, group, *everything, "--to-earliest", "--dry-run") == {0: "0", 1: "0"}
    assert group_offsets(broker, group)[0] == ("4", "10", "6")  # a dry run changes nothing
    assert reset(broker, group, "--topic", f"{topic}:0", "--to-offset", "7", "--execute") == {
        0: "7"
    }
    assert reset(broker, group, *everything, "--shift-by", "-2", "--execute") == {0: "5", 1: "8"}
    assert group_offsets(broker, group) == {0: ("5", "10", "5"), 1: ("8", "10", "2")}
    # beyond the log end: the tool clamps to the log end offset (from ListOffsets)
    assert reset(broker, group, *everything, "--to-offset", "99", "--execute") == {
        0: "10", 1: "10",
    }  # fmt: skip
    assert reset(broker, group, *everything, "--to-datetime", "2000-01-01T00:00:00.000",
                 "--execute") == {0: "0", 1: "0"}  # fmt: skip
    assert group_offsets(broker, group) == {0: ("0", "10", "10"), 1: ("0", "10", "10")}

    listed = tool(broker, CONSUMER_GROUPS, "--list", "--state", "Empty").check().stdout
    assert group in {r["GROUP"] for r in column_rows(listed)}
    deleted = tool(broker, CONSUMER_GROUPS, "--delete", "--group", group).check().stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted
    assert group not in tool(broker, CONSUMER_GROUPS, "--list").check().stdout.split()


# -- kafka-transactions ------------------------------------------------------------------------


def transactions(broker: BrokerProcess, *args: str) -> list[dict[str, str]]:
    return tab_rows(tool(broker, TRANSACTIONS, *args).check().stdout)


def test_transactions_list_describe_and_describe_producers_of_a_live_transaction(broker):
    topic, txn_id = "tools-txn", "tools-txn-id"
    create_topic(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 45000})  # fmt: skip
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=b"%d" % i, partition=1)
    assert producer.flush(30) == 0
    try:
        listed = transactions(broker, "list", "--transactional-id-pattern", "tools-txn-.*")
        (row,) = listed
        assert (row["TransactionalId"], row["Coordinator"], row["TransactionState"]) == (
            txn_id, "1", "Ongoing",
        )  # fmt: skip
        producer_id = row["ProducerId"]
        (row,) = transactions(broker, "describe", "--transactional-id", txn_id)
        assert (row["ProducerId"], row["ProducerEpoch"], row["TransactionState"]) == (
            producer_id, "0", "Ongoing",
        )  # fmt: skip
        assert (row["TransactionTimeoutMs"], row["TopicPartitions"]) == ("45000", f"{topic}-1")
        (row,) = transactions(broker, "describe-producers", "--topic", topic, "--partition", "1")
        assert (row["ProducerId"], row["LastSequence"], row["CurrentTransactionStartOffset"]) == (
            producer_id, "2", "0",
        )  # fmt: skip
        # an open transaction its coordinator knows is not hanging
        hanging = transactions(broker, "find-hanging", "--topic", topic,
                               "--max-transaction-timeout", "0")  # fmt: skip
        assert hanging == []
    finally:
        producer.commit_transaction(30)
    (row,) = transactions(broker, "describe", "--transactional-id", txn_id)
    assert (row["TransactionState"], row["TopicPartitions"]) == ("CompleteCommit", "")
    (row,) = transactions(broker, "describe-producers", "--topic", topic, "--partition", "1")
    assert row["CurrentTransactionStartOffset"] == "None"
    assert transactions(broker, "list", "--transactional-id-pattern", "nothing-.*") == []

    run = tool(broker, TRANSACTIONS, "describe", "--transactional-id", "tools-no-such-id")
    assert run.returncode == 1
    assert "failed because the ID could not be found" in run.stdout + run.stderr


def test_transactions_find_hanging_and_abort(broker):
    topic = "tools-hung"
    create_topic(broker.bootstrap, topic, 1)
    hang_a_transaction(broker.bootstrap, topic)
    assert last_stable_offset(broker.bootstrap, topic) == 1
    now = ("--max-transaction-timeout", "0")
    (row,) = transactions(broker, "find-hanging", "--broker-id", "1", *now)
    assert (row["Topic"], row["Partition"], row["ProducerId"], row["StartOffset"]) == (
        topic, "0", str(HUNG_PRODUCER_ID), "1",
    )  # fmt: skip
    # hanging only once open longer than the longest transaction timeout (15 minutes default)
    assert transactions(broker, "find-hanging", "--broker-id", "1") == []

    wrong = tool(broker, TRANSACTIONS, "abort", "--topic", topic, "--partition", "0",
                 "--start-offset", "0")  # fmt: skip
    assert wrong.returncode == 1
    assert "Could not find any open transactions starting at offset 0" in wrong.stderr
    tool(broker, TRANSACTIONS, "abort", "--topic", topic, "--partition", "0",
         "--start-offset", "1").check()  # fmt: skip
    assert last_stable_offset(broker.bootstrap, topic) == 3  # past the abort marker
    assert transactions(broker, "find-hanging", "--broker-id", "1", *now) == []
    (row,) = transactions(broker, "describe-producers", "--topic", topic, "--partition", "0")
    assert (row["ProducerId"], row["CurrentTransactionStartOffset"]) == (
        str(HUNG_PRODUCER_ID), "None",
    )  # fmt: skip


def test_transactions_force_terminate_fences_and_aborts(broker):
    topic, txn_id = "tools-fence", "tools-fence-id"
    create_topic(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"doomed", partition=0)
    assert producer.flush(30) == 0
    tool(broker, TRANSACTIONS, "forceTerminateTransaction", "--transactionalId", txn_id).check()
    (row,) = transactions(broker, "describe", "--transactional-id", txn_id)
    assert (row["TransactionState"], row["ProducerEpoch"]) == ("Empty", "2")  # abort, then fence
    assert last_stable_offset(broker.bootstrap, topic) == watermarks(broker, topic, 0)[1]
    with pytest.raises(Exception, match="(?i)fenced"):
        producer.commit_transaction(30)


# -- kafka-configs -----------------------------------------------------------------------------


def described_configs(out: str) -> dict[str, str]:
    """`  key=value sensitive=... synonyms={...}` lines of kafka-configs --describe."""
    return dict(re.findall(r"^  ([^=\s]+)=(\S*) sensitive=", out, re.MULTILINE))


def test_kafka_configs_topic_broker_and_user(broker):
    topic = "tools-configs"
    create_topic(broker.bootstrap, topic, 1)
    entity = ("--entity-type", "topics", "--entity-name", topic)
    changes = "retention.ms=5000,max.message.bytes=20000"
    out = tool(broker, CONFIGS, *entity, "--alter", "--add-config", changes).check().stdout
    assert out.strip() == f"Completed updating config for topic {topic}."
    out = tool(broker, CONFIGS, *entity, "--describe").check().stdout
    assert described_configs(out) == {"retention.ms": "5000", "max.message.bytes": "20000"}
    assert "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000, " in out
    tool(broker, CONFIGS, *entity, "--alter", "--delete-config", "retention.ms").check()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    assert entries["max.message.bytes"].value == "20000"
    assert entries["retention.ms"].is_default

    for bad, error in {
        "retention.ms=abc": "InvalidConfigurationException: invalid value for retention.ms",
        "no.such.key=1": "InvalidConfigurationException: Unknown topic config name: no.such.key",
    }.items():
        run = tool(broker, CONFIGS, *entity, "--alter", "--add-config", bad)
        assert run.returncode == 1 and error in run.stdout + run.stderr

    node = ("--entity-type", "brokers", "--entity-name", "1")
    tool(broker, CONFIGS, *node, "--alter", "--add-config", "log.cleaner.threads=2").check()
    out = tool(broker, CONFIGS, *node, "--describe").check().stdout
    assert described_configs(out) == {"log.cleaner.threads": "2"}
    assert "DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2" in out
    tool(broker, CONFIGS, *node, "--alter", "--delete-config", "log.cleaner.threads").check()
    assert described_configs(tool(broker, CONFIGS, *node, "--describe").check().stdout) == {}
    out = tool(broker, CONFIGS, *node, "--describe", "--all").check().stdout
    assert described_configs(out)["default.replication.factor"] == "1"

    user = ("--entity-type", "users", "--entity-name", "tools-alice")
    out = tool(broker, CONFIGS, *user, "--alter", "--add-config",
               "SCRAM-SHA-256=[iterations=8192,password=alice-secret]").check().stdout  # fmt: skip
    assert out.strip() == "Completed updating config for user tools-alice."
    described = admin.describe_user_scram_credentials(["tools-alice"])["tools-alice"].result(10)
    ((mechanism, iterations),) = [
        (info.mechanism.name, info.iterations) for info in described.scram_credential_infos
    ]
    assert (mechanism, iterations) == ("SCRAM_SHA_256", 8192)


def test_kafka_configs_unsupported_entities_fail_as_on_kafka(broker):
    # client quotas are not served (DescribeClientQuotas is not advertised)
    run = tool(broker, CONFIGS, "--entity-type", "users", "--describe")
    assert run.returncode == 1
    assert "UnsupportedVersionException: The node does not support DESCRIBE_CLIENT_QUOTAS" in (
        run.stdout + run.stderr
    )
    # group configs belong to the KIP-848 group protocols onceflow does not serve
    run = tool(broker, CONFIGS, "--entity-type", "groups", "--entity-name", "g", "--describe")
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


def test_kafka_acls_without_an_authorizer_is_security_disabled(broker):
    run = tool(broker, ACLS, "--list")
    assert run.returncode == 1
    assert "SecurityDisabledException" in run.stdout + run.stderr


# -- kafka-delete-records ----------------------------------------------------------------------


def test_kafka_delete_records(broker, tmp_path: Path):
    topic = "tools-delete-records"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker, topic, {0: 10, 1: 5})
    spec = tmp_path / "offsets.json"

    def delete(partition: int, offset: int) -> str:
        entry = {"topic": topic, "partition": partition, "offset": offset}
        spec.write_text(json.dumps({"version": 1, "partitions": [entry]}))
        return tool(broker, DELETE_RECORDS, "--offset-json-file", str(spec)).stdout

    assert f"partition: {topic}-0\tlow_watermark: 4" in delete(0, 4)
    assert watermarks(broker, topic, 0) == (4, 10)
    out = delete(0, 11)  # beyond the high watermark
    assert f"partition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRange" in out
    assert watermarks(broker, topic, 0) == (4, 10)
    assert f"partition: {topic}-1\tlow_watermark: 5" in delete(1, -1)  # -1: the high watermark
    assert watermarks(broker, topic, 1) == (5, 5)


# -- kafka-get-offsets -------------------------------------------------------------------------


def test_kafka_get_offsets_by_every_offset_spec(broker):
    """ListOffsets up to v10: latest, earliest, max-timestamp (-3), earliest-local (-4: the log
    start, nothing is tiered), latest-tiered (-5: offset -1, which the tool leaves out) and a
    timestamp."""
    topic = "tools-get-offsets"
    create_topic(broker.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, stamps in {0: (1000, 2000, 3000), 1: (5000, 4000)}.items():
        for stamp in stamps:
            producer.produce(topic, value=b"x", partition=partition, timestamp=stamp)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, 0, 1)]).values()
    assert future.result(10).low_watermark == 1

    def offsets(time: str) -> dict[int, int]:
        out = tool(broker, GET_OFFSETS, "--topic", topic, "--time", time).check().stdout
        found = {}
        for line in out.splitlines():
            name, partition, offset = line.rsplit(":", 2)
            assert name == topic
            found[int(partition)] = int(offset)
        return found

    assert offsets("latest") == {0: 3, 1: 2}
    assert offsets("earliest") == {0: 1, 1: 0}
    assert offsets("max-timestamp") == {0: 2, 1: 0}
    assert offsets("earliest-local") == {0: 1, 1: 0}
    assert offsets("latest-tiered") == {}
    assert offsets("2500") == {0: 2, 1: 0}


# -- kafka-verifiable-producer / kafka-verifiable-consumer ------------------------------------


def events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_verifiable_producer_then_verifiable_consumer(broker):
    topic, group, count = "tools-verifiable", "tools-verifiable-group", 300
    create_topic(broker.bootstrap, topic, 3)
    out = tool(broker, VERIFIABLE_PRODUCER, "--topic", topic, "--max-messages", str(count),
               "--acks", "-1", "--repeating-keys", "17").check().stdout  # fmt: skip
    produced = events(out)
    acked = {(e["partition"], e["offset"]): e["value"] for e in produced
             if e["name"] == "producer_send_success"}  # fmt: skip
    assert len(acked) == count and sorted(map(int, acked.values())) == list(range(count))
    (summary,) = [e for e in produced if e["name"] == "tool_data"]
    assert (summary["sent"], summary["acked"]) == (count, count)
    ends = {p: watermarks(broker, topic, p)[1] for p in range(3)}
    assert ends == {p: sum(1 for q, _ in acked if q == p) for p in range(3)}

    out = tool(broker, VERIFIABLE_CONSUMER, "--topic", topic, "--group-id", group,
               "--max-messages", str(count), "--reset-policy", "earliest",
               "--verbose").check().stdout  # fmt: skip
    consumed = events(out)
    records = {(e["partition"], e["offset"]): e["value"] for e in consumed
               if e["name"] == "record_data"}  # fmt: skip
    assert records == acked
    (assigned,) = [e for e in consumed if e["name"] == "partitions_assigned"]
    assert sorted(p["partition"] for p in assigned["partitions"]) == [0, 1, 2]
    committed: dict[int, int] = {}
    for event in consumed:
        if event["name"] == "offsets_committed":
            assert event["success"], event
            committed.update((o["partition"], o["offset"]) for o in event["offsets"])
    assert committed == {p: end for p, end in ends.items() if end}
    # the commits reached the group: no lag left
    rows = column_rows(tool(broker, CONSUMER_GROUPS, "--describe", "--group", group).stdout)
    assert {(int(r["PARTITION"]), r["LAG"]) for r in rows} == {(p, "0") for p in range(3)}


def test_verifiable_consumer_with_the_kip_848_protocol_is_unsupported(broker):
    topic = "tools-kip848"
    create_topic(broker.bootstrap, topic, 1)
    run = tool(broker, VERIFIABLE_CONSUMER, "--topic", topic, "--group-id", "tools-kip848",
               "--group-protocol", "consumer", "--max-messages", "1")  # fmt: skip
    assert "The cluster does not support the new CONSUMER group protocol" in run.stderr
    assert "does not support CONSUMER_GROUP_HEARTBEAT" in run.stderr
