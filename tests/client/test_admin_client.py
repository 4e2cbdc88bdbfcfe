"""onceflow's AdminClient against a live broker (onceflow's, Apache Kafka TV2 and TV1): topics,
partitions, ListOffsets and DeleteRecords."""

from __future__ import annotations

import time

import pytest

from onceflow.client.admin import AdminClient, DeletedRecords, NewTopic, OffsetSpec
from onceflow.client.errors import KafkaConnectionError, TopicAlreadyExistsError
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode


@pytest.fixture
def admin(peer):
    with AdminClient({"bootstrap.servers": peer.bootstrap, "client.id": "t"}) as client:
        yield client


def wait_until(condition, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def test_create_describe_list_delete(admin, peer):
    results = admin.create_topics(
        [NewTopic(peer.name("a"), 3, 1), NewTopic(peer.name("b"), 1, 1, {"retention.ms": "1000"})]
    )
    assert {n: r.error_code for n, r in results.items()} == {
        peer.name("a"): ErrorCode.NONE,
        peer.name("b"): ErrorCode.NONE,
    }
    again = admin.create_topics([NewTopic(peer.name("a"), 3, 1)])[peer.name("a")]
    assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(TopicAlreadyExistsError):
        again.raise_for_error()

    assert {peer.name("a"), peer.name("b")} <= set(admin.list_topics())
    described = admin.describe_topics([peer.name("a"), peer.name("nope")])
    assert described[peer.name("a")].error_code == ErrorCode.NONE
    assert [p.partition for p in described[peer.name("a")].partitions] == [0, 1, 2]
    node = admin.describe_cluster()[0].node_id
    assert all(
        p.leader == node and p.replicas == (node,) for p in described[peer.name("a")].partitions
    )
    assert described[peer.name("nope")].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    deleted = admin.delete_topics([peer.name("b"), peer.name("nope")])
    assert deleted[peer.name("b")].ok
    assert deleted[peer.name("nope")].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Kafka's brokers learn of a deletion from the controller's metadata log a moment later
    wait_until(lambda: peer.name("b") not in admin.list_topics())


def test_create_topic_validate_only_creates_nothing(admin, peer):
    assert admin.create_topics([NewTopic(peer.name("dry"), 2, 1)], validate_only=True)[
        peer.name("dry")
    ].ok
    assert peer.name("dry") not in admin.list_topics()


def test_create_partitions_only_grows(admin, peer):
    admin.create_topics([NewTopic(peer.name("grow"), 2, 1)])
    assert admin.create_partitions({peer.name("grow"): 5})[peer.name("grow")].ok
    grow = peer.name("grow")
    wait_until(lambda: len(admin.describe_topics([grow])[grow].partitions) == 5)
    shrink = admin.create_partitions({peer.name("grow"): 3})[peer.name("grow")]
    assert shrink.error_code == ErrorCode.INVALID_PARTITIONS
    missing = admin.create_partitions({peer.name("nope"): 3})[peer.name("nope")]
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_list_offsets_earliest_latest_and_by_timestamp(admin, peer):
    from confluent_kafka import Producer

    admin.create_topics([NewTopic(peer.name("ts"), 2, 1)])
    producer = Producer({"bootstrap.servers": peer.bootstrap, "acks": "all"})
    for i, ts in enumerate([1000, 2000, 3000]):
        producer.produce(peer.name("ts"), b"v%d" % i, partition=0, timestamp=ts)
    assert producer.flush(30) == 0

    p0, p1 = TopicPartition(peer.name("ts"), 0), TopicPartition(peer.name("ts"), 1)
    earliest = admin.list_offsets({p0: OffsetSpec.earliest(), p1: OffsetSpec.earliest()})
    latest = admin.list_offsets({p0: OffsetSpec.latest(), p1: OffsetSpec.latest()})
    assert (earliest[p0].offset, latest[p0].offset) == (0, 3)
    assert (earliest[p1].offset, latest[p1].offset) == (0, 0)

    at = admin.list_offsets({p0: OffsetSpec.for_timestamp(1500)})[p0]
    assert (at.error_code, at.offset, at.timestamp) == (ErrorCode.NONE, 1, 2000)
    exact = admin.list_offsets({p0: OffsetSpec.for_timestamp(1000)})[p0]
    assert (exact.offset, exact.timestamp) == (0, 1000)
    after = admin.list_offsets({p0: OffsetSpec.for_timestamp(9999)})[p0]
    assert (after.error_code, after.offset) == (ErrorCode.NONE, -1)

    unknown = admin.list_offsets({TopicPartition(peer.name("nope"), 0): OffsetSpec.latest()})
    assert (
        unknown[TopicPartition(peer.name("nope"), 0)].error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    bad_partition = admin.list_offsets({TopicPartition(peer.name("ts"), 7): OffsetSpec.latest()})
    assert (
        bad_partition[TopicPartition(peer.name("ts"), 7)].error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_delete_records_moves_the_low_watermark(admin, peer):
    from confluent_kafka import Producer

    admin.create_topics([NewTopic(peer.name("trim"), 2, 1)])
    producer = Producer({"bootstrap.servers": peer.bootstrap, "acks": "all"})
    for i in range(6):
        producer.produce(peer.name("trim"), b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
    p0, p1, missing = (
        TopicPartition(peer.name("trim"), 0),
        TopicPartition(peer.name("trim"), 1),
        TopicPartition(peer.name("x"), 0),
    )
    results = admin.delete_records({p0: 4, p1: 1, missing: 0})
    assert results[p0] == DeletedRecords(ErrorCode.NONE, 4)
    assert results[p1] == DeletedRecords(ErrorCode.OFFSET_OUT_OF_RANGE, -1)
    assert results[missing] == DeletedRecords(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert admin.list_offsets({p0: OffsetSpec.earliest()})[p0].offset == 4
    assert admin.delete_records({p0: -1})[p0] == DeletedRecords(ErrorCode.NONE, 6)


def test_config_needs_bootstrap_and_reports_unreachable_brokers():
    with pytest.raises(ValueError, match="bootstrap.servers"):
        AdminClient({})
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": 2000})
    with pytest.raises(KafkaConnectionError, match="127.0.0.1:1"):
        admin.list_topics()
