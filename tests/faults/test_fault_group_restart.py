"""Consumer groups across a broker crash (kill -9).

- An acknowledged OffsetCommit is durable: a confluent-kafka consumer commits synchronously,
  the broker is killed with SIGKILL right after the commit returns, and after the restart the
  group's committed offsets are exactly the last acknowledged ones.
- A running group consumer rides through the crash: it keeps consuming and committing, the
  broker is killed and restarted under it, the consumer rejoins (groups come back empty after
  a restart, so its heartbeat is answered UNKNOWN_MEMBER_ID and it joins again) and finishes
  the topic: every record read at least once, none skipped, and the final committed offsets
  are the end offsets.
"""

from __future__ import annotations

import time

from interop.test_group_confluent import (
    PARTITIONS,
    WAIT_S,
    consumer_config,
    offset_fetch,
    produce_values,
)
from interop.workload import create_topic
from support.peers import GROUP_BROKER_CONFIG


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    answer = offset_fetch(bootstrap, group, topic, require_stable=True)
    return {partition: offset for partition, (offset, _) in answer.items()}


def test_acknowledged_commit_survives_kill_9(broker_factory):
    from confluent_kafka import Consumer, TopicPartition

    broker = broker_factory(GROUP_BROKER_CONFIG)
    create_topic(broker.bootstrap, "durable", PARTITIONS)
    consumer = Consumer(consumer_config(broker.bootstrap, "durable-group"))
    try:
        for round_ in range(1, 6):
            offsets = [TopicPartition("durable", p, round_ * 10 + p) for p in range(PARTITIONS)]
            consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        broker.kill()  # before the consumer can say anything else
        consumer.close()
    broker.restart()
    assert committed(broker.bootstrap, "durable-group", "durable") == {
        p: 50 + p for p in range(PARTITIONS)
    }


def test_group_consumer_rides_through_broker_kill_9(broker_factory):
    from confluent_kafka import Consumer

    broker = broker_factory(GROUP_BROKER_CONFIG)
    create_topic(broker.bootstrap, "ride", PARTITIONS)
    n = 2000
    produce_values(broker.bootstrap, "ride", [b"r%05d" % i for i in range(n)])
    consumer = Consumer(consumer_config(broker.bootstrap, "ride-group"))
    seen: set[bytes] = set()
    killed = False
    try:
        consumer.subscribe(["ride"])
        deadline = time.monotonic() + WAIT_S * 3
        while len(seen) < n:
            assert time.monotonic() < deadline, f"read {len(seen)} of {n}"
            messages = [m for m in consumer.consume(50, timeout=0.2) if m.error() is None]
            seen.update(m.value() for m in messages)
            if messages:
                try:
                    consumer.commit(asynchronous=False)
                except Exception:  # noqa: BLE001 - the broker may be down: commit again later
                    pass
            if not killed and len(seen) >= n // 3:
                broker.restart(kill=True)
                killed = True
        assert killed
        # commit everything read so far, retrying while the group settles after the restart
        while committed(broker.bootstrap, "ride-group", "ride") != dict.fromkeys(
            range(PARTITIONS), n // PARTITIONS
        ):
            assert time.monotonic() < deadline, committed(broker.bootstrap, "ride-group", "ride")
            consumer.consume(50, timeout=0.2)
            try:
                consumer.commit(asynchronous=False)
            except Exception:  # noqa: BLE001 - nothing new to commit, or still rejoining
                pass
    finally:
        consumer.close()
    assert seen == {b"r%05d" % i for i in range(n)}
