"""Transactions with confluent-kafka (librdkafka) against a live onceflow broker.

- Atomicity and isolation: three transactional producers, each running transactions over
  three partitions concurrently and aborting about a third of them at random; a
  read_committed consumer must see exactly the committed records, each producer's in order,
  and none of the aborted ones; a read_uncommitted consumer sees every record.
- The last stable offset: while a transaction is open, a read_committed consumer stops at its
  first offset even when later records are committed; once it ends, the consumer moves on.
- Zombie fencing: a second producer with the same transactional.id fences the first; the
  first's sends, offset commits and commit fail, and nothing it wrote becomes visible.
- Offsets in a transaction (send_offsets_to_transaction) become the group's committed offsets
  only when the transaction commits (the COMMIT marker reaches `__consumer_offsets`).
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from interop.workload import create_topic

PARTITIONS = 3
BROKER_CONFIG = {
    "transaction.state.log.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture
def txn_broker(broker_factory):
    return broker_factory(BROKER_CONFIG)


def producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
        | extra
    )
    p.init_transactions(30)
    return p


def consumer(bootstrap: str, isolation: str, group: str = "reader") -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )


def read_all(bootstrap, topic, isolation, expected=None, timeout=30.0, idle=2.0):
    """Read every partition from offset 0: [(partition, offset, value)]. Stops when `expected`
    records were read, or after `idle` seconds without a record (then `timeout` at most)."""
    c = consumer(bootstrap, isolation)
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    out = []
    deadline = time.monotonic() + timeout
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if expected is not None and len(out) >= expected:
                break
            if expected is None and time.monotonic() - last > idle:
                break
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            out.append((m.partition(), m.offset(), m.value()))
            last = time.monotonic()
    finally:
        c.close()
    return out


def test_read_committed_sees_exactly_the_committed_transactions(txn_broker):
    bootstrap = txn_broker.bootstrap
    topic = "atomic"
    create_topic(bootstrap, topic, PARTITIONS)
    producers, txns_each, records_each = 3, 12, 9
    committed: list[bytes] = []
    aborted: list[bytes] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        rng = random.Random(index)
        try:
            p = producer(bootstrap, f"atomic-{index}")
            for txn in range(txns_each):
                p.begin_transaction()
                values = [b"p%d-t%02d-r%02d" % (index, txn, r) for r in range(records_each)]
                for r, value in enumerate(values):
                    p.produce(topic, value=value, partition=(r + index + txn) % PARTITIONS)
                if rng.random() < 0.35:
                    p.flush(10)  # the records are in the log before the abort
                    p.abort_transaction(30)
                    with lock:
                        aborted.extend(values)
                else:
                    p.commit_transaction(30)
                    with lock:
                        committed.extend(values)
            p.flush(10)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert committed and aborted  # both outcomes exercised (fixed seeds)

    seen = read_all(bootstrap, topic, "read_committed", expected=len(committed))
    time.sleep(0.5)
    values = [v for _, _, v in seen]
    assert sorted(values) == sorted(committed)  # exactly the committed, no aborted, no dupes
    assert not set(values) & set(aborted)
    for partition in range(PARTITIONS):
        for index in range(producers):
            mine = [v for p, _, v in seen if p == partition and v.startswith(b"p%d-" % index)]
            assert mine == sorted(mine), f"p{index} out of order on partition {partition}"
    everything = read_all(
        bootstrap, topic, "read_uncommitted", expected=len(committed) + len(aborted)
    )
    assert sorted(v for _, _, v in everything) == sorted(committed + aborted)


def test_read_committed_stops_at_an_open_transaction(txn_broker):
    bootstrap = txn_broker.bootstrap
    topic = "lso"
    create_topic(bootstrap, topic, PARTITIONS)
    early = Producer({"bootstrap.servers": bootstrap})
    early.produce(topic, value=b"before", partition=0)
    early.flush(10)
    slow = producer(bootstrap, "slow")
    slow.begin_transaction()
    slow.produce(topic, value=b"slow-1", partition=0)
    slow.flush(10)
    fast = producer(bootstrap, "fast")
    fast.begin_transaction()
    fast.produce(topic, value=b"fast-1", partition=0)
    fast.commit_transaction(30)

    committed_reader = consumer(bootstrap, "read_committed")
    committed_reader.assign([TopicPartition(topic, 0, 0)])
    uncommitted_reader = consumer(bootstrap, "read_uncommitted")
    uncommitted_reader.assign([TopicPartition(topic, 0, 0)])
    try:

        def poll_values(c, seconds):
            got, end = [], time.monotonic() + seconds
            while time.monotonic() < end:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    got.append(m.value())
            return got

        assert poll_values(committed_reader, 2.0) == [b"before"]  # fast-1 is behind slow-1
        assert poll_values(uncommitted_reader, 2.0) == [b"before", b"slow-1", b"fast-1"]
        slow.produce(topic, value=b"slow-2", partition=0)
        slow.commit_transaction(30)
        assert poll_values(committed_reader, 2.0) == [b"slow-1", b"fast-1", b"slow-2"]
    finally:
        committed_reader.close()
        uncommitted_reader.close()


def _fatal_or_fenced(exc: KafkaException) -> bool:
    error = exc.args[0]
    return error.fatal() or error.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    )


def test_zombie_producer_is_fenced(txn_broker):
    bootstrap = txn_broker.bootstrap
    topic = "zombie"
    create_topic(bootstrap, topic, PARTITIONS)
    group_reader = consumer(bootstrap, "read_committed", group="zombie-group")
    metadata = group_reader.consumer_group_metadata()

    zombie_errors: list[KafkaError] = []
    zombie = producer(bootstrap, "same-id", error_cb=zombie_errors.append)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie-before", partition=0)
    zombie.flush(10)
    successor = producer(bootstrap, "same-id")  # fences the zombie, aborts its transaction

    try:
        zombie.produce(topic, value=b"zombie-after", partition=1)
        zombie.flush(10)  # librdkafka learns it is fenced from AddPartitionsToTxn: fatal
    except KafkaException as exc:
        zombie_errors.append(exc.args[0])
    assert any(e.fatal() or e.code() == KafkaError._FENCED for e in zombie_errors)
    with pytest.raises(KafkaException) as offsets_error:
        zombie.send_offsets_to_transaction([TopicPartition(topic, 0, 42)], metadata, 10)
    assert _fatal_or_fenced(offsets_error.value)
    with pytest.raises(KafkaException) as commit_error:
        zombie.commit_transaction(10)
    assert _fatal_or_fenced(commit_error.value)

    successor.begin_transaction()
    successor.produce(topic, value=b"successor", partition=0)
    successor.commit_transaction(30)
    seen = read_all(bootstrap, topic, "read_committed")
    assert [v for _, _, v in seen] == [b"successor"]
    committed = group_reader.committed([TopicPartition(topic, 0)], timeout=10)
    assert committed[0].offset < 0  # the zombie's offsets never landed
    group_reader.close()


def test_offsets_sent_in_a_transaction_commit_with_it(txn_broker):
    bootstrap = txn_broker.bootstrap
    topic = "eos"
    create_topic(bootstrap, topic, PARTITIONS)
    reader = consumer(bootstrap, "read_committed", group="eos-group")
    metadata = reader.consumer_group_metadata()
    p = producer(bootstrap, "eos-producer")

    p.begin_transaction()
    p.produce(topic, value=b"aborted", partition=1)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 7)], metadata, 30)
    p.abort_transaction(30)
    after_abort = reader.committed([TopicPartition(topic, 0)], timeout=10)[0].offset

    p.begin_transaction()
    p.produce(topic, value=b"committed", partition=1)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 11)], metadata, 30)
    p.commit_transaction(30)
    deadline = time.monotonic() + 10
    offset = None
    while time.monotonic() < deadline:
        offset = reader.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
        if offset == 11:
            break
        time.sleep(0.1)
    reader.close()
    assert after_abort < 0
    assert offset == 11
