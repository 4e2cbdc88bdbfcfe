"""Kafka's Java producer and consumer in a consume-transform-produce loop against onceflow.

The loop is Kafka's own `TransactionalMessageCopier` (org.apache.kafka.tools, the tool Kafka's
system tests run for exactly-once): a read_committed consumer on one input partition, a
transactional producer that copies each poll's records to the same partition of the output
topic and commits the consumer's positions with `sendOffsetsToTransaction` (KIP-447 group
metadata), one transaction per poll of at most `--transaction-size` records; with
`--enable-random-aborts` about a third of the transactions are aborted and the copier rewinds
to its committed offsets. The check reads the output read_committed with confluent-kafka: each
output partition must hold exactly its input partition's records, in order, once; no
transaction may stay open (last stable offset == high watermark) and the copier's group must
have committed the input's end offsets.

The fault test kills the onceflow broker with SIGKILL while the copiers are mid-run and restarts
it on the same data directory and port; the copiers' Java clients reconnect and carry on.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.broker import BrokerProcess
from support.kafka_tools import MESSAGE_COPIER, start_tool
from support.peers import FAST_GROUP_BROKER
from support.topic_reader import confluent_read_to_end

from interop.workload import create_topic, expected_seqs, parse_seq, produce_confluent

pytestmark = pytest.mark.kafka
PARTITIONS = 2
COPIER_TIMEOUT_S = 240.0


class Copier:
    """One TransactionalMessageCopier process on one input partition; its stdout (JSON status
    lines) goes to a file."""

    def __init__(self, broker: BrokerProcess, tmp_path: Path, name: str, partition: int) -> None:
        self.stdout_path = tmp_path / f"{name}-{partition}.out"
        self.args = [
            "--broker-list", broker.bootstrap,
            "--input-topic", f"{name}-in", "--input-partition", str(partition),
            "--output-topic", f"{name}-out",
            "--transactional-id", f"{name}-copier-{partition}",
            "--consumer-group", f"{name}-group",
            "--transaction-size", "50", "--transaction-timeout", "30000",
            "--use-group-metadata", "--enable-random-aborts",
        ]  # fmt: skip
        self.proc = start_tool(MESSAGE_COPIER, *self.args, stdout_path=self.stdout_path)

    def statuses(self) -> list[dict[str, object]]:
        """The JSON status lines printed so far (log lines are skipped)."""
        found = []
        for line in self.stdout_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found

    def processed(self) -> int:
        """Records the copier has copied in committed transactions so far."""
        counts = [int(s["totalProcessed"]) for s in self.statuses() if "totalProcessed" in s]
        return max(counts, default=0)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def copier_broker(tmp_path: Path):
    broker = BrokerProcess(tmp_path / "broker" / "data", FAST_GROUP_BROKER)
    yield broker
    broker.stop()


def _prepare(broker: BrokerProcess, name: str, records: int) -> None:
    create_topic(broker.bootstrap, f"{name}-in", PARTITIONS)
    create_topic(broker.bootstrap, f"{name}-out", PARTITIONS)
    outcome = produce_confluent(broker.bootstrap, f"{name}-in", range(records), PARTITIONS)
    assert not outcome.failed and len(outcome.acked) == records


def _check_exactly_once(broker: BrokerProcess, name: str, records: int) -> None:
    """Output partition p holds input partition p's records once each, in order; nothing open;
    the copiers' group committed the input's end."""
    config = {"bootstrap.servers": broker.bootstrap}
    output = confluent_read_to_end(
        config, f"{name}-out", PARTITIONS, "read_committed", expect=records
    )
    for partition in range(PARTITIONS):
        copied = [parse_seq(value) for p, _, value in output if p == partition]
        expected = expected_seqs(records, PARTITIONS, partition)
        if copied != expected:
            missing = sorted(set(expected) - set(copied))
            extra = len(copied) - len(set(copied))
            raise AssertionError(
                f"partition {partition}: {len(copied)} records copied, {len(expected)} expected; "
                f"missing {missing[:10]}... ({len(missing)}), duplicates {extra}"
            )
    _check_no_open_transaction(config, f"{name}-out")
    consumer = Consumer({**config, "group.id": f"{name}-group", "enable.auto.commit": False})
    try:
        inputs = [TopicPartition(f"{name}-in", p) for p in range(PARTITIONS)]
        offsets = {tp.partition: tp.offset for tp in consumer.committed(inputs, timeout=10)}
    finally:
        consumer.close()
    assert offsets == {p: len(expected_seqs(records, PARTITIONS, p)) for p in range(PARTITIONS)}


def _check_no_open_transaction(config: dict[str, object], topic: str) -> None:
    """Every partition's last stable offset (a read_committed end) is its high watermark."""
    ends = {}
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = Consumer({**config, "group.id": "ends", "isolation.level": isolation})
        try:
            ends[isolation] = [
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(PARTITIONS)
            ]
        finally:
            consumer.close()
    assert ends["read_committed"] == ends["read_uncommitted"], f"a transaction open on {topic}"


def _run_copiers(broker: BrokerProcess, tmp_path: Path, name: str) -> list[Copier]:
    return [Copier(broker, tmp_path, name, partition) for partition in range(PARTITIONS)]


def _wait_all(copiers: list[Copier]) -> None:
    for copier in copiers:
        code = copier.wait(COPIER_TIMEOUT_S)
        assert code == 0, copier.stdout_path.read_text(errors="replace")[-5000:]


def test_copier_copies_every_record_exactly_once(copier_broker, tmp_path):
    name, records = "copy", 2000
    _prepare(copier_broker, name, records)
    copiers = _run_copiers(copier_broker, tmp_path, name)
    try:
        _wait_all(copiers)
    finally:
        for copier in copiers:
            copier.stop()
    assert sum(c.processed() for c in copiers) == records
    _check_exactly_once(copier_broker, name, records)


def test_copier_survives_kill_9_of_the_broker_mid_run(copier_broker, tmp_path):
    name, records = "crash", 6000
    _prepare(copier_broker, name, records)
    copiers = _run_copiers(copier_broker, tmp_path, name)
    try:
        deadline = time.monotonic() + COPIER_TIMEOUT_S
        while sum(c.processed() for c in copiers) < records // 4:
            assert time.monotonic() < deadline, "the copiers made no progress"
            assert all(c.proc.poll() is None for c in copiers), "a copier ended early"
            time.sleep(0.05)
        copier_broker.restart(kill=True)
        _wait_all(copiers)
    finally:
        for copier in copiers:
            copier.stop()
    _check_exactly_once(copier_broker, name, records)
