"""Apache Kafka's operations tools against the onceflow broker.

Each test runs the classes behind `kafka-log-dirs.sh`, `kafka-broker-api-versions.sh`,
`kafka-features.sh`, `kafka-leader-election.sh`, `kafka-cluster.sh`, `kafka-groups.sh`,
`kafka-metadata-quorum.sh` and `kafka-producer/consumer-perf-test.sh` (support.kafka_tools)
and checks what they print against what the broker holds: the segment files on disk, the
served API versions, the data directory's meta.properties, the records a read_committed
consumer counts. What onceflow does not serve (leader election, the KRaft quorum, feature
updates, broker unregistration) must fail the way Kafka's tools report it on a broker without
the API, and the broker must go on serving. One broker serves the module (`node`,
tests/interop/conftest.py); every test uses its own topics and groups.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from support.broker import BrokerProcess
from support.kafka_tools import (
    BROKER_API_VERSIONS,
    CLUSTER,
    CONSUMER_PERFORMANCE,
    FEATURES,
    GROUPS,
    LEADER_ELECTION,
    LOG_DIRS,
    METADATA_QUORUM,
    PRODUCER_PERFORMANCE,
    ToolRun,
    column_rows,
    run_tool,
    tool,
    watermarks,
)
from support.topic_reader import confluent_read_to_end

from interop.workload import create_topic
from onceflow.broker.served_versions import SUPPORTED_VERSIONS
from onceflow.properties import parse_properties

pytestmark = pytest.mark.kafka


def assert_serving(broker: BrokerProcess, topic: str) -> None:
    """The broker still answers Metadata after a tool was refused."""
    listed = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert topic in listed.topics
    assert broker.is_running()


def produce(broker: BrokerProcess, topic: str, per_partition: dict[int, int]) -> None:
    """`count` records of 1 to 100 bytes to each partition, acks=all."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, value=b"x" * (1 + i % 100), partition=partition)
    assert producer.flush(30) == 0


# -- kafka-log-dirs ----------------------------------------------------------------------------


def segment_bytes(data_dir: Path, topic: str, partition: int) -> int:
    return sum(path.stat().st_size for path in (data_dir / f"{topic}-{partition}").glob("*.log"))


def test_log_dirs_lists_each_partition_with_its_size_on_disk(node):
    topic = "ops-log-dirs"
    create_topic(node.bootstrap, topic, 3)
    produce(node, topic, {1: 5, 2: 300})
    out = tool(node, LOG_DIRS, "--describe", "--broker-list", "1", "--topic-list", topic)
    (line,) = [line for line in out.check().stdout.splitlines() if line.startswith("{")]
    described = json.loads(line)
    assert described["version"] == 1
    (broker,) = described["brokers"]
    (log_dir,) = broker["logDirs"]
    assert (broker["broker"], log_dir["logDir"], log_dir["error"]) == (1, str(node.data_dir), None)
    sizes = {entry["partition"]: entry["size"] for entry in log_dir["partitions"]}
    assert sizes == {f"{topic}-{p}": segment_bytes(node.data_dir, topic, p) for p in range(3)}
    assert sizes[f"{topic}-0"] == 0 < sizes[f"{topic}-1"] < sizes[f"{topic}-2"]
    assert {(e["offsetLag"], e["isFuture"]) for e in log_dir["partitions"]} == {(0, False)}

    run = tool(node, LOG_DIRS, "--describe", "--broker-list", "1,2")
    assert run.returncode == 1
    assert "The given brokers do not exist from --broker-list: 2. Current existent brokers: 1" in (
        run.stdout + run.stderr
    )


# -- kafka-broker-api-versions -----------------------------------------------------------------

API_LINE = re.compile(
    r"^\t\w+\((\d+)\): (?:(\d+) to (\d+)|(\d+)|UNSUPPORTED)(?: \[usable: (\d+)\])?,?$"
)


def test_broker_api_versions_lists_exactly_the_served_versions(node):
    out = tool(node, BROKER_API_VERSIONS).check().stdout
    lines = out.splitlines()
    assert lines[0] == f"{node.bootstrap} (id: 1 rack: null isFenced: false) -> ("
    assert lines[-1] == ")"
    listed, usable, refused = {}, {}, set()
    for line in lines[1:-1]:
        match = API_LINE.match(line)
        assert match, line
        key, low, high, only, use = match.groups()
        if only is not None:
            low = high = only
        if low is None:
            refused.add(int(key))
        else:
            listed[int(key)] = (int(low), int(high))
            usable[int(key)] = int(use)
    assert listed == {int(key): versions for key, versions in SUPPORTED_VERSIONS.items()}
    # Kafka 4.4's client knows each served version; it uses our highest one
    assert usable == {key: high for key, (_, high) in listed.items()}
    assert {23, 34, 43, 45, 46, 48, 49, 55, 57, 68} <= refused


# -- kafka-features ----------------------------------------------------------------------------


def test_features_describe_lists_none_and_updates_are_unsupported(node):
    # ApiVersions carries no supported or finalized features: describe prints no feature
    assert tool(node, FEATURES, "describe").check().stdout == ""
    run = tool(node, FEATURES, "upgrade", "--feature", "transaction.version=2")
    assert run.returncode == 1
    assert (
        "Could not upgrade transaction.version to 2. The node does not support UPDATE_FEATURES"
        in (run.stdout)
    )
    assert "1 out of 1 operation(s) failed." in run.stderr


# -- kafka-leader-election, kafka-metadata-quorum: not served ----------------------------------


def test_leader_election_is_unsupported(node):
    topic = "ops-election"
    create_topic(node.bootstrap, topic, 1)
    for how in (("--all-topic-partitions",), ("--topic", topic, "--partition", "0")):
        run = tool(node, LEADER_ELECTION, "--election-type", "preferred", *how)
        assert run.returncode == 1
        assert "UnsupportedVersionException: The node does not support ELECT_LEADERS" in (
            run.stderr
        )
    assert_serving(node, topic)


def test_metadata_quorum_is_unsupported(node):
    topic = "ops-quorum"
    create_topic(node.bootstrap, topic, 1)
    for what in ("--status", "--replication"):
        run = tool(node, METADATA_QUORUM, "describe", what)
        assert run.returncode == 1
        assert "UnsupportedVersionException: The node does not support DESCRIBE_QUORUM" in (
            run.stderr
        )
    assert_serving(node, topic)


# -- kafka-cluster -----------------------------------------------------------------------------


def cluster(broker: BrokerProcess, command: str, *args: str) -> ToolRun:
    """kafka-cluster takes its subcommand before `--bootstrap-server`."""
    return run_tool(CLUSTER, command, "--bootstrap-server", broker.bootstrap, *args)


def test_cluster_id_endpoints_and_api_versions(node):
    meta = parse_properties((node.data_dir / "meta.properties").read_text())
    out = cluster(node, "cluster-id").check().stdout
    assert out.strip() == f"Cluster ID: {meta['cluster.id']}"
    # --include-fenced-brokers needs DescribeCluster v2
    for fenced_too in ((), ("--include-fenced-brokers",)):
        rows = column_rows(cluster(node, "list-endpoints", *fenced_too).check().stdout, "ID")
        assert rows == [{"ID": "1", "HOST": node.host, "PORT": str(node.port), "RACK": "null",
                         "STATE": "unfenced", "ENDPOINT_TYPE": "broker"}]  # fmt: skip
    assert cluster(node, "api-versions").check().stdout == (
        tool(node, BROKER_API_VERSIONS).check().stdout
    )
    # Kafka's tool answers an UnregisterBroker the cluster does not serve with exit status 0
    out = cluster(node, "unregister", "--id", "1").check().stdout
    assert out.strip() == "The target cluster does not support the broker unregistration API."


# -- kafka-producer-perf-test, kafka-consumer-perf-test, kafka-groups --------------------------


def test_transactional_producer_perf_then_consumer_perf_and_groups_list(node, tmp_path):
    topic, records, size = "ops-perf", 3000, 100
    create_topic(node.bootstrap, topic, 2)
    aborted = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "ops-aborted"})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    for i in range(7):
        aborted.produce(topic, value=b"aborted", partition=i % 2)
    assert aborted.flush(30) == 0  # librdkafka's abort drops what it has not sent
    aborted.abort_transaction(30)

    out = run_tool(PRODUCER_PERFORMANCE, "--bootstrap-server", node.bootstrap, "--topic", topic,
                   "--num-records", str(records), "--record-size", str(size),
                   "--throughput", "6000", "--transactional-id", "ops-perf-txn",
                   "--transaction-duration-ms", "100").check().stdout  # fmt: skip
    assert re.search(rf"^{records} records sent, ", out, re.MULTILINE), out
    config = {"bootstrap.servers": node.bootstrap}
    committed = confluent_read_to_end(config, topic, 2, "read_committed", expect=records)
    assert len(committed) == records
    assert {len(value) for _, _, value in committed} == {size}
    everything = confluent_read_to_end(config, topic, 2, "read_uncommitted", expect=records + 7)
    assert len(everything) == records + 7
    # the offsets left over are markers: the abort's two, then one per partition of each commit
    ends = [watermarks(node, topic, partition)[1] for partition in range(2)]
    commit_markers = sum(ends) - records - 7 - 2
    assert commit_markers >= 2 * 2, "half a second at 6000 records/s is several transactions"

    config_file = tmp_path / "consumer.properties"
    config_file.write_text("isolation.level=read_committed\n")
    out = tool(node, CONSUMER_PERFORMANCE, "--topic", topic, "--num-records", str(records),
               "--group", "ops-perf-group", "--command-config", str(config_file),
               "--timeout", "20000").check().stdout  # fmt: skip
    assert "WARNING" not in out, out
    header, row = [line for line in out.splitlines() if line.count(",") == 9]
    stats = dict(zip(header.split(", "), row.split(", "), strict=True))
    assert int(stats["data.consumed.in.nMsg"]) == records
    assert float(stats["data.consumed.in.MB"]) == round(records * size / 1024 / 1024, 4)

    rows = column_rows(tool(node, GROUPS, "--list").check().stdout)
    assert {"GROUP": "ops-perf-group", "TYPE": "Classic", "PROTOCOL": "consumer"} in rows
    assert "ops-perf-group" in {r["GROUP"] for r in column_rows(
        tool(node, GROUPS, "--list", "--consumer").check().stdout)}  # fmt: skip
    for other in ("--share", "--streams"):
        assert column_rows(tool(node, GROUPS, "--list", other).check().stdout) == []
