"""Consumer groups with confluent-kafka (librdkafka 2.x) against a live onceflow broker.

- Two consumers subscribed to a 4-partition topic split the partitions; when one closes (it
  sends LeaveGroup) the other is given all four.
- A consumer commits synchronously; a new consumer of the group resumes exactly after the
  committed offsets (nothing read twice, nothing skipped); the committed offsets survive a
  broker restart.
- Static membership (KIP-345): a consumer with `group.instance.id` that closes and comes back
  within the session timeout gets its old partitions back without a rebalance — the other
  member sees no revoke or assign.
- OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT while a transactional
  producer's `send_offsets_to_transaction` is not yet committed; the offsets appear once the
  transaction commits, and never when it aborts.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from interop.workload import create_topic
from onceflow.client.connection import BrokerConnection
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.offset_fetch import OffsetFetchRequest

PARTITIONS = 4
WAIT_S = 30.0


def consumer_config(bootstrap: str, group: str, **extra) -> dict:
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "topic.metadata.refresh.interval.ms": 2000,
    }
    config.update(extra)
    return config


def produce_values(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Produce `values` round-robin over the topic's partitions (value i -> partition i % 4)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    assert producer.flush(WAIT_S) == 0


def poll_until(consumers, done: Callable[[], bool], timeout: float = WAIT_S, sink=None) -> None:
    """Poll every consumer in turn until `done()`; messages go to `sink(consumer, msg)`."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        for consumer in consumers:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None and sink is not None:
                sink(consumer, msg)


def assigned(consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def offset_fetch(bootstrap: str, group: str, topic: str, *, require_stable: bool) -> dict:
    """Raw OffsetFetch v7: {partition: (committed offset, error code)}."""
    request = OffsetFetchRequest(
        group_id=group,
        topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(
                name=topic, partition_indexes=list(range(PARTITIONS))
            )
        ],
        require_stable=require_stable,
    )
    with BrokerConnection.from_address(bootstrap) as connection:
        response = connection.send(request, 7)
    assert response.error_code == ErrorCode.NONE
    return {
        p.partition_index: (p.committed_offset, p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def stable_offsets(bootstrap: str, group: str, topic: str) -> dict:
    """OffsetFetch with require_stable, retried while UNSTABLE_OFFSET_COMMIT (the markers of
    a finished transaction are written after EndTxn answers, as in Kafka)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = offset_fetch(bootstrap, group, topic, require_stable=True)
        errors = {error for _, error in answer.values()}
        if errors != {ErrorCode.UNSTABLE_OFFSET_COMMIT} or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def test_two_consumers_split_partitions_then_one_takes_all(group_broker):
    from confluent_kafka import Consumer

    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "split", PARTITIONS)
    first = Consumer(consumer_config(bootstrap, "split-group"))
    second = Consumer(consumer_config(bootstrap, "split-group"))
    try:
        first.subscribe(["split"])
        second.subscribe(["split"])
        poll_until(
            [first, second],
            lambda: len(assigned(first)) == 2 and len(assigned(second)) == 2,
        )
        assert assigned(first) | assigned(second) == set(range(PARTITIONS))
        second.close()  # LeaveGroup: the rebalance starts now, not after the 6 s session timeout
        poll_until([first], lambda: assigned(first) == set(range(PARTITIONS)), timeout=4.0)
    finally:
        first.close()


def _consume_all(consumer, expected: int, timeout: float = WAIT_S) -> list[bytes]:
    values: list[bytes] = []
    poll_until(
        [consumer], lambda: len(values) >= expected, timeout, lambda c, m: values.append(m.value())
    )
    # nothing more arrives
    extra = consumer.poll(0.5)
    assert extra is None or extra.error() is not None, extra.value()
    return values


def test_committed_offsets_resume_a_new_consumer_and_survive_a_restart(group_broker):
    from confluent_kafka import Consumer, TopicPartition

    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "resume", PARTITIONS)
    produce_values(bootstrap, "resume", [b"a%03d" % i for i in range(100)])

    first = Consumer(consumer_config(bootstrap, "resume-group"))
    first.subscribe(["resume"])
    assert sorted(_consume_all(first, 100)) == [b"a%03d" % i for i in range(100)]
    first.commit(asynchronous=False)
    first.close()

    produce_values(bootstrap, "resume", [b"b%03d" % i for i in range(100)])
    second = Consumer(consumer_config(bootstrap, "resume-group"))
    second.subscribe(["resume"])
    assert sorted(_consume_all(second, 100)) == [b"b%03d" % i for i in range(100)]
    second.commit(asynchronous=False)
    second.close()

    group_broker.restart()
    produce_values(bootstrap, "resume", [b"c%03d" % i for i in range(20)])
    third = Consumer(consumer_config(bootstrap, "resume-group"))
    try:
        committed = third.committed(
            [TopicPartition("resume", p) for p in range(PARTITIONS)], timeout=WAIT_S
        )
        assert [tp.offset for tp in committed] == [50] * PARTITIONS
        third.subscribe(["resume"])
        assert sorted(_consume_all(third, 20)) == [b"c%03d" % i for i in range(20)]
    finally:
        third.close()


def test_static_member_rejoins_without_a_rebalance(group_broker):
    from confluent_kafka import Consumer

    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "static", PARTITIONS)
    events: list[tuple[str, frozenset[int]]] = []

    def on_assign(consumer, partitions):
        events.append(("assign", frozenset(p.partition for p in partitions)))

    def on_revoke(consumer, partitions):
        events.append(("revoke", frozenset(p.partition for p in partitions)))

    config_a = consumer_config(bootstrap, "static-group", **{"group.instance.id": "a"})
    config_b = consumer_config(bootstrap, "static-group", **{"group.instance.id": "b"})
    a = Consumer(config_a)
    b = Consumer(config_b)
    replacement = None
    try:
        a.subscribe(["static"])
        b.subscribe(["static"], on_assign=on_assign, on_revoke=on_revoke)
        poll_until([a, b], lambda: len(assigned(a)) == 2 and len(assigned(b)) == 2)
        before_a, before_b = assigned(a), assigned(b)
        # let b settle: the first rebalance may have taken it through several generations
        settle = time.monotonic() + 1.0
        while time.monotonic() < settle:
            a.poll(0.05)
            b.poll(0.05)
        events_before = list(events)
        a.close()  # a static member does not send LeaveGroup
        replacement = Consumer(config_a)
        replacement.subscribe(["static"])
        poll_until([replacement, b], lambda: assigned(replacement) == before_a)
        # keep b polling for a while: a rebalance would revoke and reassign its partitions
        settle = time.monotonic() + 3.0
        while time.monotonic() < settle:
            replacement.poll(0.05)
            b.poll(0.05)
        assert events == events_before
        assert assigned(b) == before_b
    finally:
        if replacement is not None:
            replacement.close()
        b.close()


def test_require_stable_sees_pending_transactional_offsets(group_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition

    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "stable-in", PARTITIONS)
    create_topic(bootstrap, "stable-out", PARTITIONS)
    produce_values(bootstrap, "stable-in", [b"x%d" % i for i in range(40)])
    consumer = Consumer(consumer_config(bootstrap, "stable-group"))
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "stable-tx"})
    try:
        consumer.subscribe(["stable-in"])
        _consume_all(consumer, 40)
        producer.init_transactions(WAIT_S)

        def send_offsets(offset: int, commit: bool) -> None:
            producer.begin_transaction()
            producer.produce("stable-out", value=b"out", partition=0)
            offsets = [TopicPartition("stable-in", p, offset) for p in range(PARTITIONS)]
            producer.send_offsets_to_transaction(
                offsets, consumer.consumer_group_metadata(), WAIT_S
            )
            pending = offset_fetch(bootstrap, "stable-group", "stable-in", require_stable=True)
            assert pending == dict.fromkeys(
                range(PARTITIONS), (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
            )
            if commit:
                producer.commit_transaction(WAIT_S)
            else:
                producer.abort_transaction(WAIT_S)

        send_offsets(7, commit=False)
        after_abort = stable_offsets(bootstrap, "stable-group", "stable-in")
        assert after_abort == dict.fromkeys(range(PARTITIONS), (-1, ErrorCode.NONE))
        send_offsets(10, commit=True)
        after_commit = stable_offsets(bootstrap, "stable-group", "stable-in")
        assert after_commit == dict.fromkeys(range(PARTITIONS), (10, ErrorCode.NONE))
    finally:
        consumer.close()
