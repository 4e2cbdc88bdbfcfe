"""Apache Kafka's own data and group tools against the onceflow broker.

Each test runs the classes behind `kafka-topics.sh`, `kafka-console-producer.sh`,
`kafka-console-consumer.sh`, `kafka-consumer-groups.sh`, `kafka-delete-records.sh`,
`kafka-get-offsets.sh` and `kafka-verifiable-producer/consumer.sh` (support.kafka_tools) and
checks what they print, and where it matters what the broker then holds, through
confluent-kafka. One broker serves the module (`node`, tests/interop/conftest.py); every
test uses its own topics and groups. The KIP-848 consumer protocol, which onceflow does not
serve, must fail the way Kafka's client reports an unsupported feature. The admin tools
(transactions, configs, ACLs) are in test_kafka_admin_tools.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.broker import BrokerProcess
from support.kafka_tools import (
    CONSOLE_CONSUMER,
    CONSOLE_PRODUCER,
    CONSUMER_GROUPS,
    DELETE_RECORDS,
    GET_OFFSETS,
    TOPICS,
    VERIFIABLE_CONSUMER,
    VERIFIABLE_PRODUCER,
    column_rows,
    tool,
    watermarks,
)

from interop.workload import create_topic

pytestmark = pytest.mark.kafka


def produce(broker: BrokerProcess, topic: str, per_partition: dict[int, int]) -> None:
    """`count` records `p-i` to each partition `p`, acks=all."""
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


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


def test_kafka_topics_create_list_describe_alter_delete(node):
    topic = "tools-topic"
    created = tool(node, TOPICS, "--create", "--topic", topic, "--partitions", "3",
                   "--config", "retention.ms=123456").check()  # fmt: skip
    assert created.stdout.strip() == f"Created topic {topic}."
    assert topic in tool(node, TOPICS, "--list").check().stdout.split()

    summary, partitions = describe_topic(node, topic)
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

    tool(node, TOPICS, "--alter", "--topic", topic, "--partitions", "5").check()
    create_topic(node.bootstrap, f"{topic}-2", 2)
    # two partitions per answer: the tool follows the cursor across both topics
    paged = describe_topics(node, "--topic", f"{topic}.*", "--partition-size-limit-per-response",
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
        run = tool(node, TOPICS, *args)
        assert run.returncode == 1 and error in run.stdout + run.stderr, (args, run)

    assert tool(node, TOPICS, "--delete", "--topic", topic).check().returncode == 0
    assert topic not in tool(node, TOPICS, "--list").check().stdout.split()


# -- kafka-console-producer / kafka-console-consumer -----------------------------------------


def test_console_producer_then_console_consumer_read_committed(node):
    topic, group = "tools-console", "tools-console-group"
    create_topic(node.bootstrap, topic, 2)
    lines = [f"key{i % 7}:value {i}" for i in range(40)]
    tool(node, CONSOLE_PRODUCER, "--topic", topic, "--reader-property", "parse.key=true",
         "--reader-property", "key.separator=:", stdin="\n".join(lines) + "\n").check()  # fmt: skip

    run = tool(node, CONSOLE_CONSUMER, "--topic", topic, "--from-beginning", "--group", group,
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
    rows = column_rows(tool(node, CONSUMER_GROUPS, "--describe", "--group", group).stdout)
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


def test_consumer_groups_members_lag_and_reset_offsets(node):
    topic, group = "tools-groups", "tools-groups-group"
    create_topic(node.bootstrap, topic, 2)
    produce(node, topic, {0: 10, 1: 10})
    member = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group,
                       "client.id": "tools-member", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        member.subscribe([topic])
        while len(member.assignment()) < 2:
            member.poll(0.2)
        member.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 10)],
                      asynchronous=False)  # fmt: skip
        out = tool(node, CONSUMER_GROUPS, "--describe", "--group", group, "--members").stdout
        (row,) = column_rows(out)
        assert (row["CLIENT-ID"], row["#PARTITIONS"]) == ("tools-member", "2")
        out = tool(node, CONSUMER_GROUPS, "--describe", "--group", group, "--state").stdout
        (row,) = column_rows(out)
        assert (row["STATE"], row["#MEMBERS"], row["ASSIGNMENT-STRATEGY"]) == ("Stable", "1",
                                                                              "range")  # fmt: skip
        run = tool(node, CONSUMER_GROUPS, "--reset-offsets", "--group", group, "--all-topics",
                   "--to-earliest", "--execute")  # fmt: skip
        assert "can only be reset if the group 'tools-groups-group' is inactive" in run.stdout
        assert group_offsets(node, group)[0] == ("4", "10", "6")  # unchanged
    finally:
        member.close()

    assert group_offsets(node, group) == {0: ("4", "10", "6"), 1: ("10", "10", "0")}
    everything = ("--all-topics",)
    assert reset(node, group, *everything, "--to-earliest", "--dry-run") == {0: "0", 1: "0"}
    assert group_offsets(node, group)[0] == ("4", "10", "6")  # a dry run changes nothing
    assert reset(node, group, "--topic", f"{topic}:0", "--to-offset", "7", "--execute") == {0: "7"}
    assert reset(node, group, *everything, "--shift-by", "-2", "--execute") == {
        0: "5",
        1: "8",
    }
    assert group_offsets(node, group) == {0: ("5", "10", "5"), 1: ("8", "10", "2")}
    # beyond the log end: the tool clamps to the log end offset (from ListOffsets)
    assert reset(node, group, *everything, "--to-offset", "99", "--execute") == {
        0: "10", 1: "10",
    }  # fmt: skip
    assert reset(node, group, *everything, "--to-datetime", "2000-01-01T00:00:00.000",
                 "--execute") == {0: "0", 1: "0"}  # fmt: skip
    assert group_offsets(node, group) == {0: ("0", "10", "10"), 1: ("0", "10", "10")}

    listed = tool(node, CONSUMER_GROUPS, "--list", "--state", "Empty").check().stdout
    assert group in {r["GROUP"] for r in column_rows(listed)}
    deleted = tool(node, CONSUMER_GROUPS, "--delete", "--group", group).check().stdout
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted
    assert group not in tool(node, CONSUMER_GROUPS, "--list").check().stdout.split()


# -- kafka-delete-records ----------------------------------------------------------------------


def test_kafka_delete_records(node, tmp_path: Path):
    topic = "tools-delete-records"
    create_topic(node.bootstrap, topic, 2)
    produce(node, topic, {0: 10, 1: 5})
    spec = tmp_path / "offsets.json"

    def delete(partition: int, offset: int) -> str:
        entry = {"topic": topic, "partition": partition, "offset": offset}
        spec.write_text(json.dumps({"version": 1, "partitions": [entry]}))
        return tool(node, DELETE_RECORDS, "--offset-json-file", str(spec)).stdout

    assert f"partition: {topic}-0\tlow_watermark: 4" in delete(0, 4)
    assert watermarks(node, topic, 0) == (4, 10)
    out = delete(0, 11)  # beyond the high watermark
    assert f"partition: {topic}-0\terror: org.apache.kafka.common.errors.OffsetOutOfRange" in out
    assert watermarks(node, topic, 0) == (4, 10)
    assert f"partition: {topic}-1\tlow_watermark: 5" in delete(1, -1)  # -1: the high watermark
    assert watermarks(node, topic, 1) == (5, 5)


# -- kafka-get-offsets -------------------------------------------------------------------------


def test_kafka_get_offsets_by_every_offset_spec(node):
    """ListOffsets up to v10: latest, earliest, max-timestamp (-3), earliest-local (-4: the log
    start, nothing is tiered), latest-tiered (-5: offset -1, which the tool leaves out) and a
    timestamp."""
    topic = "tools-get-offsets"
    create_topic(node.bootstrap, topic, 2)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for partition, stamps in {0: (1000, 2000, 3000), 1: (5000, 4000)}.items():
        for stamp in stamps:
            producer.produce(topic, value=b"x", partition=partition, timestamp=stamp)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, 0, 1)]).values()
    assert future.result(10).low_watermark == 1

    def offsets(time: str) -> dict[int, int]:
        out = tool(node, GET_OFFSETS, "--topic", topic, "--time", time).check().stdout
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


def test_verifiable_producer_then_verifiable_consumer(node):
    topic, group, count = "tools-verifiable", "tools-verifiable-group", 300
    create_topic(node.bootstrap, topic, 3)
    out = tool(node, VERIFIABLE_PRODUCER, "--topic", topic, "--max-messages", str(count),
               "--acks", "-1", "--repeating-keys", "17").check().stdout  # fmt: skip
    produced = events(out)
    acked = {(e["partition"], e["offset"]): e["value"] for e in produced
             if e["name"] == "producer_send_success"}  # fmt: skip
    assert len(acked) == count and sorted(map(int, acked.values())) == list(range(count))
    (summary,) = [e for e in produced if e["name"] == "tool_data"]
    assert (summary["sent"], summary["acked"]) == (count, count)
    ends = {p: watermarks(node, topic, p)[1] for p in range(3)}
    assert ends == {p: sum(1 for q, _ in acked if q == p) for p in range(3)}

    out = tool(node, VERIFIABLE_CONSUMER, "--topic", topic, "--group-id", group,
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
    rows = column_rows(tool(node, CONSUMER_GROUPS, "--describe", "--group", group).stdout)
    assert {(int(r["PARTITION"]), r["LAG"]) for r in rows} == {(p, "0") for p in range(3)}


def test_verifiable_consumer_with_the_kip_848_protocol_is_unsupported(node):
    topic = "tools-kip848"
    create_topic(node.bootstrap, topic, 1)
    run = tool(node, VERIFIABLE_CONSUMER, "--topic", topic, "--group-id", "tools-kip848",
               "--group-protocol", "consumer", "--max-messages", "1")  # fmt: skip
    assert "The cluster does not support the new CONSUMER group protocol" in run.stderr
    assert "does not support CONSUMER_GROUP_HEARTBEAT" in run.stderr
