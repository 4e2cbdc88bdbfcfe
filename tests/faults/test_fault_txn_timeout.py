"""A paused transactional producer: the coordinator aborts its transaction on timeout.

A child process runs a librdkafka transactional producer with transaction.timeout.ms=2000,
writes records in a transaction, flushes them and is then frozen with SIGSTOP. The records
pin the last stable offset: a read_committed consumer cannot get past them, not even to
records another producer commits later. The coordinator's timeout check
(`transaction.abort.timed.out.transaction.cleanup.interval.ms=300`) must fence the producer's
epoch and abort the transaction, so the consumer moves on and never sees the paused
producer's records. Resumed with SIGCONT, the producer's commit fails: it was fenced.
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import textwrap
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from interop.workload import create_topic

PARTITIONS = 3
CHILD = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Producer
    bootstrap, topic = sys.argv[1], sys.argv[2]
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "paused",
                  "transaction.timeout.ms": 2000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=b"paused-%d" % i, partition=i % 3)
    p.flush(10)
    print("READY", flush=True)
    sys.stdin.readline()
    try:
        p.commit_transaction(10)
        print("COMMITTED", flush=True)
    except Exception as exc:
        print("FAILED", exc, flush=True)
    """
)


def read_line(proc, timeout):
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"child printed nothing in {timeout}s")
    return proc.stdout.readline().strip()


def test_paused_producer_is_aborted_after_its_timeout(broker_factory):
    broker = broker_factory(
        {
            "transaction.state.log.num.partitions": 3,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
        }
    )
    topic = "paused"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, broker.bootstrap, topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    reader = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "paused-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        assert read_line(child, 60) == "READY"
        paused_at = time.monotonic()
        child.send_signal(signal.SIGSTOP)
        other = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "other"})
        other.init_transactions(30)
        other.begin_transaction()
        for p in range(PARTITIONS):
            other.produce(topic, value=b"other-%d" % p, partition=p)
        other.commit_transaction(30)

        reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        seen, blocked_until = [], None
        deadline = time.monotonic() + 30
        while len(seen) < PARTITIONS and time.monotonic() < deadline:
            m = reader.poll(0.1)
            if m is not None and not m.error():
                if blocked_until is None:
                    blocked_until = time.monotonic()
                seen.append(m.value())
        # the committed records sat behind the paused transaction until the coordinator
        # aborted it (timeout 2 s, checked every 0.3 s)
        assert blocked_until is not None and blocked_until - paused_at >= 1.5
        assert sorted(seen) == [b"other-%d" % p for p in range(PARTITIONS)]

        child.send_signal(signal.SIGCONT)
        child.stdin.write("\n")
        child.stdin.flush()
        outcome = read_line(child, 30)
        assert outcome.startswith("FAILED"), outcome
        time.sleep(0.5)
        assert reader.poll(1.0) is None  # nothing of the paused producer ever shows up
    finally:
        reader.close()
        child.kill()
        child.wait()
    assert "aborting timed-out transaction of 'paused'" in broker.log_text()
