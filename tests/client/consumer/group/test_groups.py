"""onceflow consumer groups against a live broker (onceflow's, Apache Kafka TV2 and TV1).

- two onceflow consumers split a 4-partition topic (range and roundrobin), with on_assign /
  on_revoke around each rebalance; auto-commit on revoke means the records they read add up
  to the topic exactly once; when one closes (LeaveGroup) the other gets every partition;
- commit / committed, and a new member resumes right after the committed offsets;
- confluent-kafka's group and ours, in separate groups, each read the whole topic; a
  confluent-kafka consumer resumes from offsets our consumer committed;
- static membership (KIP-345): a restarted static member gets its partitions back without a
  rebalance.
"""

from __future__ import annotations

import time

import pytest

from client.client_support import group_consumer, poll_until, produce
from client.helpers import create_topic
from onceflow.client import TopicPartition
from onceflow.client.errors import ConfigException, IllegalStateError

PARTITIONS = 4
N = 400


@pytest.fixture
def group_broker(peer):
    """The broker with topic `peer.name("events")`: N records over PARTITIONS partitions."""
    events = peer.name("events")
    create_topic(peer.bootstrap, events, PARTITIONS)
    produce(peer.bootstrap, events, [b"v%04d" % i for i in range(N)], PARTITIONS)
    return peer


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_two_consumers_rebalance_and_read_each_record_once(group_broker, strategy):
    topic = group_broker.name("events")
    bootstrap = group_broker.bootstrap
    events: list[tuple[str, list[int]]] = []

    def callbacks(name):
        def on_assign(consumer, partitions):
            events.append((f"assign-{name}", sorted(p.partition for p in partitions)))

        def on_revoke(consumer, partitions):
            events.append((f"revoke-{name}", sorted(p.partition for p in partitions)))

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    config = {
        "enable.auto.commit": True,
        "max.poll.records": 20,
        "partition.assignment.strategy": strategy,
    }
    first = group_consumer(bootstrap, group_broker.name(f"g-{strategy}"), **config)
    second = group_consumer(bootstrap, group_broker.name(f"g-{strategy}"), **config)
    seen: list[tuple[str, int, int]] = []

    def sink(consumer, record):
        seen.append((consumer.client_id, record.partition, record.offset))

    try:
        first.subscribe([topic], **callbacks("first"))
        poll_until([first], lambda: len(seen) >= 100, sink)
        assert first.assignment() == {TopicPartition(topic, p) for p in range(PARTITIONS)}
        second.subscribe([topic], **callbacks("second"))
        poll_until(
            [first, second],
            lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2,
            sink,
        )
        assert first.assignment().isdisjoint(second.assignment())
        assert ("revoke-first", [0, 1, 2, 3]) in events
        poll_until([first, second], lambda: len(seen) >= 300, sink)
        second.close()
        poll_until([first], lambda: len(first.assignment()) == PARTITIONS, sink)
        poll_until([first], lambda: len(seen) >= N, sink)
        time.sleep(0.3)
        for record in first.poll(0.3):
            sink(first, record)
    finally:
        first.close()
        second.close()
    positions = sorted((p, o) for _c, p, o in seen)
    assert positions == sorted((p, o) for p in range(PARTITIONS) for o in range(N // PARTITIONS))
    assert {c for c, _p, _o in seen} == {first.client_id, second.client_id}
    assert events[0] == ("assign-first", [0, 1, 2, 3])


def test_commit_committed_and_resume(group_broker):
    events = group_broker.name("events")
    bootstrap = group_broker.bootstrap
    consumer = group_consumer(bootstrap, group_broker.name("resume"))
    records = []
    try:
        consumer.subscribe([events])
        poll_until([consumer], lambda: len(records) >= 40, lambda c, r: records.append(r))
        last = {}
        for r in records:
            last[TopicPartition(r.topic, r.partition)] = r.offset + 1
        committed = consumer.commit(last)
        assert {tp: c.offset for tp, c in committed.items()} == last
        answer = consumer.committed([TopicPartition(events, p) for p in range(PARTITIONS)])
        for p in range(PARTITIONS):
            tp = TopicPartition(events, p)
            assert (answer[tp].offset if answer[tp] else None) == last.get(tp)
        metadata = consumer.consumer_group_metadata()
        assert (
            metadata.group_id == group_broker.name("resume")
            and metadata.generation_id >= 1
            and metadata.member_id
        )
    finally:
        consumer.close()
    later = group_consumer(bootstrap, group_broker.name("resume"))
    resumed = []
    try:
        later.subscribe([events])
        poll_until(
            [later], lambda: len(resumed) >= N - sum(last.values()), lambda c, r: resumed.append(r)
        )
    finally:
        later.close()
    for r in resumed:
        assert r.offset >= last.get(TopicPartition(r.topic, r.partition), 0)
    assert len(resumed) == N - sum(last.values())


def test_group_api_needs_group_id_and_excludes_assign(group_broker):
    events = group_broker.name("events")
    from onceflow.client import Consumer

    with Consumer({"bootstrap.servers": group_broker.bootstrap}) as plain:
        with pytest.raises(ConfigException):
            plain.subscribe([events])
        with pytest.raises(ConfigException):
            plain.commit()
    consumer = group_consumer(group_broker.bootstrap, group_broker.name("exclusive"))
    try:
        consumer.subscribe([events])
        with pytest.raises(IllegalStateError):
            consumer.assign([(events, 0)])
    finally:
        consumer.close()


def test_confluent_and_onceflow_groups_read_the_same_topic(group_broker):
    events = group_broker.name("events")
    from confluent_kafka import Consumer as ConfluentConsumer

    bootstrap = group_broker.bootstrap
    ours = group_consumer(bootstrap, group_broker.name("ours"))
    theirs = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_broker.name("theirs"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    our_values, their_values = [], []
    try:
        ours.subscribe([events])
        theirs.subscribe([events])
        deadline = time.monotonic() + 30
        while len(our_values) < N or len(their_values) < N:
            assert time.monotonic() < deadline, (len(our_values), len(their_values))
            our_values += [r.value for r in ours.poll(0.05)]
            for msg in theirs.consume(num_messages=500, timeout=0.05):
                if msg.error() is None:
                    their_values.append(msg.value())
        ours.commit()
    finally:
        ours.close()
        theirs.close()
    assert sorted(our_values) == sorted(their_values) == [b"v%04d" % i for i in range(N)]

    # a confluent-kafka member of our group resumes after the offsets we committed
    produce(bootstrap, events, [b"w%04d" % i for i in range(8)], PARTITIONS)
    follower = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_broker.name("ours"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    values = []
    try:
        follower.subscribe([events])
        deadline = time.monotonic() + 30
        while len(values) < 8:
            assert time.monotonic() < deadline, values
            msg = follower.poll(0.1)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        follower.close()
    assert sorted(values) == [b"w%04d" % i for i in range(8)]


def test_mixed_group_with_confluent_member_splits_partitions(group_broker):
    """Our subscription/assignment bytes interoperate with librdkafka's in one group."""
    events = group_broker.name("events")
    from confluent_kafka import Consumer as ConfluentConsumer

    bootstrap = group_broker.bootstrap
    ours = group_consumer(bootstrap, group_broker.name("mixed"))
    assigned: list[int] = []
    theirs = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group_broker.name("mixed"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "partition.assignment.strategy": "range",
        }
    )
    try:
        ours.subscribe([events])
        poll_until([ours], lambda: len(ours.assignment()) == PARTITIONS)
        theirs.subscribe([events], on_assign=lambda c, ps: assigned.extend(p.partition for p in ps))
        deadline = time.monotonic() + 30
        while not (len(ours.assignment()) == 2 and len(assigned) == 2):
            assert time.monotonic() < deadline, (ours.assignment(), assigned)
            ours.poll(0.05)
            theirs.poll(0.05)
        ours_partitions = {tp.partition for tp in ours.assignment()}
        assert ours_partitions | set(assigned) == set(range(PARTITIONS))
        assert ours_partitions.isdisjoint(assigned)
    finally:
        theirs.close()
        ours.close()


def test_assigned_partitions_of_a_group_consumer_start_at_committed_offsets(group_broker):
    """Kafka's consumer with group.id and assign(): no group membership, but positions come
    from the group's committed offsets (auto.offset.reset where none), and poll returns
    records at once (it used to return [] because the group had never joined)."""
    events = group_broker.name("events")
    bootstrap = group_broker.bootstrap
    first = group_consumer(bootstrap, group_broker.name("manual"))
    try:
        first.assign([TopicPartition(events, 0), TopicPartition(events, 1)])
        got = first.poll(10)
        assert got, "poll returned nothing for assigned partitions of a group consumer"
        first.commit({TopicPartition(events, 0): 30})
    finally:
        first.close()
    second = group_consumer(bootstrap, group_broker.name("manual"))
    try:
        second.assign([TopicPartition(events, 0), TopicPartition(events, 1), (events, 2, 95)])
        positions = {}
        deadline = time.monotonic() + 10
        while len(positions) < 3 and time.monotonic() < deadline:
            for record in second.poll(0.5):
                positions.setdefault(record.partition, record.offset)
        assert positions == {0: 30, 1: 0, 2: 95}  # committed, earliest (none committed), given
    finally:
        second.close()


def test_a_new_member_joins_without_waiting_a_retry_backoff(group_broker):
    events = group_broker.name("events")
    # JoinGroup v4+ answers a member without an id MEMBER_ID_REQUIRED (KIP-394); the consumer
    # joins again with the id at once. With a one-minute retry backoff a wait would show.
    consumer = group_consumer(
        group_broker.bootstrap,
        group_broker.name("no-wait"),
        **{"retry.backoff.ms": 60_000, "retry.backoff.max.ms": 60_000},
    )
    try:
        consumer.subscribe([events])
        poll_until([consumer], lambda: len(consumer.assignment()) == PARTITIONS, timeout=30)
    finally:
        consumer.close()


def test_a_static_member_that_restarts_gets_its_partitions_back_without_a_rebalance(
    group_broker,
):
    """KIP-345: two static members (group.instance.id) split the topic; one closes (no
    LeaveGroup) and a new consumer with its instance id joins within the session timeout:
    it gets the same partitions, and the other member sees no rebalance."""
    topic = group_broker.name("events")
    group = group_broker.name("g-static")
    revoked: list[str] = []

    def member(instance: str):
        consumer = group_consumer(group_broker.bootstrap, group, **{"group.instance.id": instance})
        consumer.subscribe(
            [topic], on_revoke=lambda c, parts: revoked.append(instance) if parts else None
        )
        return consumer

    first, second = member("static-a"), member("static-b")
    replacement = None
    try:
        poll_until(
            [first, second],
            lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2,
        )
        first_parts, second_parts = first.assignment(), second.assignment()
        second.close()  # revokes its own partitions locally, as Kafka's consumer does
        revoked.clear()
        replacement = member("static-b")
        poll_until([first, replacement], lambda: replacement.assignment() == second_parts)
        for _ in range(10):  # time for a rebalance to show, had one been started
            first.poll(0.1)
            replacement.poll(0.1)
        assert first.assignment() == first_parts and revoked == []
    finally:
        for consumer in (first, second, replacement):
            if consumer is not None:
                consumer.close()
