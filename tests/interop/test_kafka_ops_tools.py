"""Apache Kafka's operations tools against the onceflow broker.

Each test runs the classes behind `kafka-log-dirs.sh`, `kafka-broker-api-versions.sh`,
`kafka-features.sh`, `kafka-leader-election.sh`, `kafka-cluster.sh`, `kafka-groups.sh`,
`kafka-metadata-quorum.sh`, `kafka-producer/consumer-perf-test.sh` and `kafka-dump-log.sh`
(support.kafka_tools) and checks what they print against what the broker holds: the segment
files on disk, the served API versions, the data directory's meta.properties, the records a
read_committed consumer counts; kafka-dump-log reads the data directory with Kafka's own
batch, index and internal-topic decoders. What onceflow does not serve (leader election, the
KRaft quorum, feature updates, broker unregistration) must fail the way Kafka's tools report it
on a broker without the API, and the broker must go on serving. One broker serves the module
(`node`, tests/interop/conftest.py); every test uses its own topics and groups.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from support.broker import BrokerProcess
from support.kafka_tools import (
    BROKER_API_VERSIONS,
    CLIENT_METRICS,
    CLUSTER,
    CONSUMER_PERFORMANCE,
    DELEGATION_TOKENS,
    DUMP_LOG,
    END_TO_END_LATENCY,
    FEATURES,
    GROUPS,
    LEADER_ELECTION,
    LOG_DIRS,
    METADATA_QUORUM,
    PRODUCER_PERFORMANCE,
    REASSIGN_PARTITIONS,
    ToolRun,
    column_rows,
    run_tool,
    tool,
    watermarks,
)
from support.topic_reader import confluent_read_to_end

from interop.workload import create_topic
from onceflow.broker.served_versions import SUPPORTED_VERSIONS
from onceflow.client.admin import AdminClient as OnceflowAdminClient
from onceflow.coordinator.partitioning import coordinator_partition
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


# -- not served: leader election, the quorum, reassignment, client metrics, delegation tokens --

UNSUPPORTED = {
    "leader-election --all-topic-partitions": (
        LEADER_ELECTION, ("--election-type", "preferred", "--all-topic-partitions"),
        "ELECT_LEADERS",
    ),
    "leader-election --topic": (
        LEADER_ELECTION, ("--election-type", "preferred", "--topic", "ops-refused",
                          "--partition", "0"),
        "ELECT_LEADERS",
    ),
    "metadata-quorum --status": (METADATA_QUORUM, ("describe", "--status"), "DESCRIBE_QUORUM"),
    "metadata-quorum --replication": (
        METADATA_QUORUM, ("describe", "--replication"), "DESCRIBE_QUORUM",
    ),
    "reassign-partitions --list": (
        REASSIGN_PARTITIONS, ("--list",), "LIST_PARTITION_REASSIGNMENTS",
    ),
    "client-metrics --list": (CLIENT_METRICS, ("--list",), "LIST_CONFIG_RESOURCES"),
    "delegation-tokens --describe": (
        DELEGATION_TOKENS, ("--describe", "--command-config", "EMPTY"),
        "DESCRIBE_DELEGATION_TOKEN",
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def refused_topic(node: BrokerProcess) -> str:
    create_topic(node.bootstrap, "ops-refused", 1)
    return "ops-refused"


@pytest.mark.parametrize("case", UNSUPPORTED)
def test_tools_of_unserved_apis_fail_as_on_kafka(node, refused_topic, tmp_path, case):
    main_class, args, api = UNSUPPORTED[case]
    empty = tmp_path / "empty.properties"
    empty.write_text("")
    run = tool(node, main_class, *(str(empty) if arg == "EMPTY" else arg for arg in args))
    assert run.returncode == 1
    assert (
        f"UnsupportedVersionException: The node does not support {api}" in run.stdout + run.stderr
    )
    assert_serving(node, refused_topic)


# -- kafka-e2e-latency -------------------------------------------------------------------------


def test_end_to_end_latency_round_trips_each_record(node):
    # the tool fails when a record it reads back is not the one it sent
    topic = "ops-e2e"
    create_topic(node.bootstrap, topic, 1)
    out = tool(node, END_TO_END_LATENCY, "--topic", topic, "--num-records", "200",
               "--producer-acks", "all", "--record-size", "100").check().stdout  # fmt: skip
    assert re.search(r"^Avg latency: [\d.]+ ms$", out, re.MULTILINE), out
    assert watermarks(node, topic, 0)[1] == 200


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

    offsets_only = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "ops-offsets-only"})
    offsets_only.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    offsets_only.close()
    rows = column_rows(tool(node, GROUPS, "--list").check().stdout)
    assert {"GROUP": "ops-perf-group", "TYPE": "Classic", "PROTOCOL": "consumer"} in rows
    assert {"GROUP": "ops-offsets-only", "TYPE": "Classic", "PROTOCOL": ""} in rows
    assert "ops-perf-group" in {r["GROUP"] for r in column_rows(
        tool(node, GROUPS, "--list", "--consumer").check().stdout)}  # fmt: skip
    for other in ("--share", "--streams"):
        assert column_rows(tool(node, GROUPS, "--list", other).check().stdout) == []


# -- kafka-dump-log ----------------------------------------------------------------------------

BATCH_LINE = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isTransactional: (\w+) "
    r"isControl: (\w+) .* position: (\d+) .* isvalid: (\w+)$"
)
DECODED_LINE = re.compile(r"^\| offset: \d+ .* key: (\{.*\}) payload: (\{.*\})$")


def dump_log(*args: str) -> str:
    """kafka-dump-log's output (it reads the files itself: no broker involved)."""
    return run_tool(DUMP_LOG, *args).check().stdout


def decoded(out: str) -> list[tuple[dict, dict]]:
    """(key, payload) of each record an internal-topic decoder printed."""
    return [
        (json.loads(match[1]), json.loads(match[2]))
        for match in map(DECODED_LINE.match, out.splitlines())
        if match
    ]


def partition_map(state: dict) -> dict[str, list[int]]:
    """A transaction-log value's partitions as {topic: partition ids}."""
    return {entry["topic"]: entry["partitionIds"] for entry in state["transactionPartitions"]}


def wait_complete_commit(broker: BrokerProcess, txn_id: str, timeout: float = 20.0) -> None:
    """Until the coordinator describes `txn_id` as CompleteCommit (its markers are written
    after EndTxn returns)."""
    deadline = time.monotonic() + timeout
    with OnceflowAdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        while admin.describe_transactions([txn_id])[txn_id].state != "CompleteCommit":
            assert time.monotonic() < deadline, f"{txn_id} not completed"
            time.sleep(0.05)


def internal_logs(data_dir: Path, topic: str) -> str:
    return ",".join(str(path) for path in sorted(data_dir.glob(f"{topic}-*/*.log")))


def test_dump_log_reads_segments_indexes_and_internal_topics(node):
    topic, txn_id, group = "ops-dump", "ops-dump-txn", "ops-dump-group"
    create_topic(node.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 0, "batch.size": 4000})  # fmt: skip
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group})
    producer.init_transactions(30)
    values = [b"%03d-" % i + b"x" * 200 for i in range(100)]
    for txn, half in enumerate((values[:50], values[50:])):
        producer.begin_transaction()
        for value in half:
            producer.produce(topic, value=value, partition=0)
        if txn == 1:
            offsets = [TopicPartition(topic, 0, 77)]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    consumer.close()
    wait_complete_commit(node, txn_id)  # markers and the last state record are then durable
    end = watermarks(node, topic, 0)[1]

    segment = node.data_dir / f"{topic}-0" / f"{0:020d}"
    out = dump_log("--deep-iteration", "--print-data-log", "--files", f"{segment}.log")
    batches = [m.groups() for m in map(BATCH_LINE.match, out.splitlines()) if m]
    assert {(transactional, valid) for *_, transactional, _, _, valid in batches} == {
        ("true", "true")
    }
    offsets_covered = [o for base, last, *_ in batches for o in range(int(base), int(last) + 1)]
    assert offsets_covered == list(range(end))
    assert [b[:3] for b in batches if b[4] == "true"] == [("50", "50", "1"), ("101", "101", "1")]
    assert out.count("endTxnMarker: COMMIT coordinatorEpoch: ") == 2
    assert re.findall(r" payload: (\S+)$", out, re.MULTILINE) == [v.decode() for v in values]

    # each offset-index entry: the last offset of the batch at its position (Kafka's rule)
    index_files = f"{segment}.index,{segment}.timeindex"
    verified = run_tool(DUMP_LOG, "--verify-index-only", "--files", index_files).check()
    assert verified.stderr == ""  # where it reports index entries that miss their batch
    entries = re.findall(r"^offset: (\d+) position: (\d+)$", dump_log("--files", index_files), re.M)
    positions = {(last, position) for _, last, _, _, _, position, _ in batches}
    assert len(entries) >= 2 and set(entries) <= positions

    out = dump_log("--transaction-log-decoder", "--files",
                   internal_logs(node.data_dir, "__transaction_state"))  # fmt: skip
    txn_records = decoded(out)
    states = [value["data"] for key, value in txn_records
              if key["data"] == {"transactionalId": txn_id}]  # fmt: skip
    assert {(s["producerId"], s["producerEpoch"]) for s in states} == {(states[0]["producerId"], 0)}
    offsets_partitions = len(list(node.data_dir.glob("__consumer_offsets-*")))
    data = {topic: [0]}
    both = {**data, "__consumer_offsets": [coordinator_partition(group, offsets_partitions)]}
    assert [(s["transactionStatus"], partition_map(s)) for s in states] == [
        ("Empty", {}),
        ("Ongoing", data), ("PrepareCommit", data), ("CompleteCommit", {}),
        ("Ongoing", data), ("Ongoing", both), ("PrepareCommit", both), ("CompleteCommit", {}),
    ]  # fmt: skip

    out = dump_log(
        "--offsets-decoder", "--files", internal_logs(node.data_dir, "__consumer_offsets")
    )
    committed = [(key["data"], value["data"]["offset"]) for key, value in decoded(out)
                 if key["type"] == "1" and key["data"]["group"] == group]  # fmt: skip
    assert committed == [({"group": group, "topic": topic, "partition": 0}, 77)]
    assert "endTxnMarker: COMMIT" in out
