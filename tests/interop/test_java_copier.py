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

The fault tests kill the onceflow broker with SIGKILL while the copiers are mid-run and restart
it on the same data directory and port (the copiers' Java clients reconnect and carry on), and
kill one copier and start another with the same transactional id in its place.
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.broker import BrokerProcess
from support.kafka_tools import MESSAGE_COPIER, start_tool
from support.peers import FAST_GROUP_BROKER
from support.topic_reader import confluent_read_to_end

from interop.workload import create_topic, expected_seqs, parse_seq, produce_confluent
from onceflow.client.connection import BrokerConnection
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.offset_fetch import OffsetFetchRequest

pytestmark = pytest.mark.kafka
PARTITIONS = 2
COPIER_TIMEOUT_S = 240.0


class Copier:
    """One TransactionalMessageCopier process on one input partition; its stdout (JSON status
    lines) goes to a file."""

    def __init__(
        self,
        broker: BrokerProcess,
        tmp_path: Path,
        name: str,
        partition: int,
        *,
        random_aborts: bool = True,
        attempt: int = 0,
        transaction_timeout_ms: int = 30000,
    ) -> None:
        self.stdout_path = tmp_path / f"{name}-{partition}-{attempt}.out"
        args = [
            "--broker-list", broker.bootstrap,
            "--input-topic", f"{name}-in", "--input-partition", str(partition),
            "--output-topic", f"{name}-out",
            "--transactional-id", f"{name}-copier-{partition}",
            "--consumer-group", f"{name}-group",
            "--transaction-size", "50", "--transaction-timeout", str(transaction_timeout_ms),
            "--use-group-metadata",
        ]  # fmt: skip
        if random_aborts:
            args.append("--enable-random-aborts")
        self.proc = start_tool(MESSAGE_COPIER, *args, stdout_path=self.stdout_path)

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
    # the coordinator looks for timed-out transactions twice a second (Kafka: every 10 s)
    config = {
        **FAST_GROUP_BROKER,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    }  # noqa: E501
    broker = BrokerProcess(tmp_path / "broker" / "data", config)
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


def _run_copiers(broker: BrokerProcess, tmp_path: Path, name: str, **options) -> list[Copier]:
    return [Copier(broker, tmp_path, name, partition, **options) for partition in range(PARTITIONS)]


def _offsets_pending(broker: BrokerProcess, group: str, topic: str, partition: int) -> bool:
    """Does an open transaction hold an offset of `group` for the partition? (OffsetFetch with
    require_stable answers UNSTABLE_OFFSET_COMMIT then, KIP-447.)"""
    request = OffsetFetchRequest(
        group_id=group,
        topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])
        ],
        require_stable=True,
    )
    with BrokerConnection.from_address(broker.bootstrap) as conn:
        (answer,) = conn.send(request, version=7).topics[0].partitions
    return answer.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT


def _kill_with_offsets_in_its_transaction(broker: BrokerProcess, copier: Copier, name: str) -> None:
    """Freeze the copier (SIGSTOP) until it is caught with offsets in its open transaction,
    then kill -9 it: its transaction stays open with offsets the replacement must not see."""
    deadline = time.monotonic() + COPIER_TIMEOUT_S
    while True:
        assert copier.proc.poll() is None, "the copier ended before it could be caught"
        assert time.monotonic() < deadline, "never caught with offsets in its transaction"
        copier.proc.send_signal(signal.SIGSTOP)
        if _offsets_pending(broker, f"{name}-group", f"{name}-in", 0):
            copier.stop()
            return
        copier.proc.send_signal(signal.SIGCONT)
        time.sleep(random.uniform(0.0, 0.02))


def _wait_for_progress(copiers: list[Copier], records: int) -> None:
    """Until the copiers have committed `records` between them, all still running."""
    deadline = time.monotonic() + COPIER_TIMEOUT_S
    while sum(c.processed() for c in copiers) < records:
        assert time.monotonic() < deadline, "the copiers made no progress"
        assert all(c.proc.poll() is None for c in copiers), "a copier ended early"
        time.sleep(0.05)


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
        _wait_for_progress(copiers, records // 4)
        copier_broker.restart(kill=True)
        _wait_all(copiers)
    finally:
        for copier in copiers:
            copier.stop()
    _check_exactly_once(copier_broker, name, records)


def test_copiers_killed_mid_transaction_are_replaced_exactly_once(copier_broker, tmp_path):
    """kill -9 of a copier (a crashed application instance) and a new one with the same
    transactional id in its place, twice. Each kill lands while the dead copier's open
    transaction holds offsets (it is frozen until caught so). The new copier asks its consumer's
    position before `initTransactions`, so it waits (UNSTABLE_OFFSET_COMMIT, KIP-447) until the
    coordinator aborts that transaction on its timeout, as it would on Kafka (hence a short
    transaction timeout); its InitProducerId fences the old producer, and it resumes from the
    last committed offsets. No random aborts, so every abort is a crash's."""
    name, records = "zombie", 6000
    _prepare(copier_broker, name, records)
    options = {"random_aborts": False, "transaction_timeout_ms": 4000}
    copiers = _run_copiers(copier_broker, tmp_path, name, **options)
    current = copiers[0]  # partition 0's copier
    try:
        for attempt in (1, 2):
            _wait_for_progress([current], 400)
            _kill_with_offsets_in_its_transaction(copier_broker, current, name)
            current = Copier(copier_broker, tmp_path, name, 0, attempt=attempt, **options)
            copiers.append(current)
        _wait_all([copiers[1], current])
    finally:
        for copier in copiers:
            copier.stop()
    assert 0 < current.processed() < records // PARTITIONS  # it resumed, not restarted
    _check_exactly_once(copier_broker, name, records)
