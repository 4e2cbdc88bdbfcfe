"""The log cleaner in a real broker process: kill -9 at each step of a swap, and internal topics
that stay bounded across restarts.

- With `onceflow.test.crash.cleaner=<point>` the broker exits as kill -9 would (status 137)
  right after that step of its first swap. Restarted without it, the log loads: a
  confluent-kafka consumer reads, at every offset it gets, the record produced there; the
  latest value of every key is unchanged; the cleaner then finishes and the topic shrinks.
- `__consumer_offsets` and `__transaction_state` (small segments, eager cleaner) after many
  offset commits over a few partitions and many transactions over one transactional id: the
  cleaner shrinks them; after a restart the group's committed offsets and the transactional
  id's state (its producer can init again and commit) are what they were.
"""

from __future__ import annotations

import time

import pytest
from interop.test_group_confluent import consumer_config
from interop.workload import create_topic

from faults.test_fault_group_restart import committed
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.config_admin import AlterOp, ConfigResource
from onceflow.log.cleaner.swap import CRASH_POINTS

EAGER_CLEANER = {"log.cleaner.backoff.ms": 100, "log.cleaner.min.cleanable.ratio": "0.01"}
KEYS = 10
RECORDS = 600


def _produce_keyed(bootstrap: str, topic: str) -> dict[int, tuple[bytes, bytes]]:
    from confluent_kafka import Producer

    produced: dict[int, tuple[bytes, bytes]] = {}

    def on_delivery(err, msg) -> None:
        assert err is None, err
        produced[msg.offset()] = (msg.key(), msg.value())

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(
            topic, key=b"key-%d" % (i % KEYS), value=b"value-%05d" % i, on_delivery=on_delivery
        )
        if i % 50 == 0:
            producer.flush()
    producer.flush()
    return produced


def _read_all(bootstrap: str, topic: str) -> dict[int, tuple[bytes, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cleaner-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: dict[int, tuple[bytes, bytes]] = {}
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                break
            got[msg.offset()] = (msg.key(), msg.value())
    finally:
        consumer.close()
    return got


def _latest(records: dict[int, tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    return {key: value for _, (key, value) in sorted(records.items())}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_9_at_each_swap_step(broker_factory, point):
    crashing = broker_factory({**EAGER_CLEANER, "onceflow.test.crash.cleaner": point})
    with AdminClient({"bootstrap.servers": crashing.bootstrap}) as admin:
        admin.create_topics([NewTopic("table", 1, 1, {"segment.bytes": "3000"})])
        produced = _produce_keyed(crashing.bootstrap, "table")
        # compacted only now, so the crash cannot come while producing
        resource = ConfigResource(2, "table")
        changes = {resource: [AlterOp("cleanup.policy", 0, "compact")]}
        assert admin.incremental_alter_configs(changes)[resource].error_code == 0
    assert crashing.proc.wait(30) == 137, "the broker did not reach the crash point"
    assert f"onceflow.test.crash.cleaner={point}" in crashing.log_text()

    restarted = broker_factory(EAGER_CLEANER, data_dir=crashing.data_dir)
    got = _read_all(restarted.bootstrap, "table")
    assert got and all(produced[offset] == record for offset, record in got.items())
    assert _latest(got) == _latest(produced)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(got) > RECORDS // 3:
        time.sleep(0.3)
        got = _read_all(restarted.bootstrap, "table")
    cleaned = [line for line in restarted.log_text().splitlines() if "clean" in line]
    assert len(got) <= RECORDS // 3, (len(got), cleaned[-5:])
    assert _latest(got) == _latest(produced)


def _dir_bytes(path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.log"))


def test_internal_topics_stay_bounded_and_load_after_cleaning(broker_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = broker_factory(
        {
            **EAGER_CLEANER,
            "offsets.topic.num.partitions": 1,
            "offsets.topic.segment.bytes": 4096,
            "transaction.state.log.num.partitions": 1,
            "transaction.state.log.segment.bytes": 4096,
            "group.initial.rebalance.delay.ms": 0,
        }
    )
    create_topic(broker.bootstrap, "tracked", 4)
    consumer = Consumer(consumer_config(broker.bootstrap, "bounded-group"))
    for round_ in range(1, 301):
        offsets = [TopicPartition("tracked", p, round_ * 10 + p) for p in range(4)]
        consumer.commit(offsets=offsets, asynchronous=False)
    consumer.close()
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "transactional.id": "bounded-txn", "linger.ms": 0}
    )
    producer.init_transactions(30)
    for i in range(100):
        producer.begin_transaction()
        producer.produce("tracked", key=b"k", value=b"%d" % i, partition=i % 4)
        if i % 5 == 4:
            # delivered first, so the partition is in the transaction: librdkafka sends an
            # abort's EndTxn after an AddPartitionsToTxn refused with CONCURRENT_TRANSACTIONS
            # (the previous commit still completing), which Kafka 4.4 too answers
            # INVALID_TXN_STATE (librdkafka issue 4849)
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    offsets_dir = broker.data_dir / "__consumer_offsets-0"
    txn_dir = broker.data_dir / "__transaction_state-0"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _dir_bytes(offsets_dir) < 8192 and _dir_bytes(txn_dir) < 8192:
            break
        time.sleep(0.3)
    assert _dir_bytes(offsets_dir) < 8192, _dir_bytes(offsets_dir)
    assert _dir_bytes(txn_dir) < 8192, _dir_bytes(txn_dir)

    broker.restart()
    assert committed(broker.bootstrap, "bounded-group", "tracked") == {
        p: 3000 + p for p in range(4)
    }
    again = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "bounded-txn"})
    again.init_transactions(30)
    again.begin_transaction()
    again.produce("tracked", key=b"k", value=b"after-restart", partition=0)
    again.commit_transaction(30)
    reader = Consumer(
        consumer_config(broker.bootstrap, "bounded-reader", **{"isolation.level": "read_committed"})
    )
    reader.assign([TopicPartition("tracked", 0, 0)])
    values = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and b"after-restart" not in values:
        msg = reader.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
    reader.close()
    assert b"after-restart" in values
    aborted = {b"%d" % i for i in range(100) if i % 5 == 4}
    assert not aborted & set(values)
