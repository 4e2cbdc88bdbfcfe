"""The streaming source in a real local Spark session: maxOffsetsPerTrigger spreads a backlog
over several batches in per-partition order; an open transaction holds the stream at its first
offset until it ends; partitions added while the query runs are read from offset 0; a deleted
topic stops the query with failOnDataLoss=true and is skipped with false."""

from __future__ import annotations

import time
import uuid

import pytest
from support.broker import BrokerProcess
from support.topics import create_topics, produce

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer

pytestmark = pytest.mark.slow


class Collector:
    """foreachBatch target: (batch id, partition, offset, value) of every row, in order."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, bytes]] = []

    def __call__(self, df, batch_id: int) -> None:
        for r in df.collect():
            self.rows.append((batch_id, r.partition, r.offset, bytes(r.value)))

    def values(self) -> list[bytes]:
        return [row[3] for row in self.rows]


def _start(
    session, bootstrap: str, topic: str, collector: Collector, tmp_path, checkpoint=None, **options
):
    reader = (
        session.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.foreachBatch(collector)
        .option("checkpointLocation", str(checkpoint or tmp_path / f"cp-{uuid.uuid4().hex}"))
        .start()
    )


def test_max_offsets_per_trigger_keeps_partition_order(session, module_broker, tmp_path):
    bootstrap = module_broker.bootstrap
    create_topics(bootstrap, ["backlog"], 3)
    values = [b"%d" % i for i in range(600)]
    produce(bootstrap, "backlog", values, 3)
    collector = Collector()
    query = _start(session, bootstrap, "backlog", collector, tmp_path, maxOffsetsPerTrigger="100")
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(collector.values()) == sorted(values)
    batches = {row[0] for row in collector.rows}
    assert len(batches) >= 6  # 600 offsets, at most 100 a batch
    for partition in range(3):
        offsets = [row[2] for row in collector.rows if row[1] == partition]
        assert offsets == list(range(200)), partition


def test_open_transaction_holds_the_stream(session, module_broker, tmp_path):
    bootstrap = module_broker.bootstrap
    create_topics(bootstrap, ["held"], 1)
    produce(bootstrap, "held", [b"before-%d" % i for i in range(10)], 1)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "holder"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.send("held", b"txn-%d" % i, partition=0)
    txn.flush(30)
    produce(bootstrap, "held", [b"after-%d" % i for i in range(10)], 1)  # committed, later
    collector = Collector()
    query = _start(session, bootstrap, "held", collector, tmp_path)
    try:
        query.processAllAvailable()
        assert collector.values() == [b"before-%d" % i for i in range(10)]
        txn.commit_transaction(30)
        query.processAllAvailable()
    finally:
        query.stop()
        txn.close()
    later = [b"txn-%d" % i for i in range(5)] + [b"after-%d" % i for i in range(10)]
    assert collector.values() == [b"before-%d" % i for i in range(10)] + later


def test_new_partitions_are_read_from_the_start(session, module_broker, tmp_path):
    bootstrap = module_broker.bootstrap
    create_topics(bootstrap, ["growing"], 1)
    produce(bootstrap, "growing", [b"p0-%d" % i for i in range(5)], 1)
    collector = Collector()
    query = _start(session, bootstrap, "growing", collector, tmp_path)
    try:
        query.processAllAvailable()
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            assert admin.create_partitions({"growing": 3})["growing"].ok
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            for partition in (1, 2):
                for i in range(4):
                    producer.send("growing", b"p%d-%d" % (partition, i), partition=partition)
            producer.flush(30)
        query.processAllAvailable()
    finally:
        query.stop()
    got = sorted((row[1], row[2]) for row in collector.rows)
    assert got == [(0, o) for o in range(5)] + [(p, o) for p in (1, 2) for o in range(4)]


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_deleted_topic(session, module_broker, tmp_path, fail_on_data_loss):
    bootstrap = module_broker.bootstrap
    topic = f"doomed-{fail_on_data_loss}".lower()
    create_topics(bootstrap, [topic], 2)
    produce(bootstrap, topic, [b"x"] * 6, 2)
    collector = Collector()
    query = _start(
        session, bootstrap, topic, collector, tmp_path, failOnDataLoss=str(fail_on_data_loss)
    )
    try:
        query.processAllAvailable()
        assert len(collector.rows) == 6
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            assert admin.delete_topics([topic])[topic].ok
        if fail_on_data_loss:
            with pytest.raises(Exception, match=f"{topic}") as failure:
                query.processAllAvailable()
            assert "failOnDataLoss" in str(failure.value)
        else:
            query.processAllAvailable()
            assert query.isActive and query.exception() is None
    finally:
        query.stop()


def test_offsets_removed_by_retention(session, tmp_path):
    """A read that starts below the log start offset (retention removed the records): an error
    naming the partition and offsets with failOnDataLoss=true, the rest with false."""
    from onceflow.client.admin import OffsetSpec
    from onceflow.common import TopicPartition

    broker = BrokerProcess(tmp_path / "trimmed", {"log.retention.check.interval.ms": 200})
    try:
        bootstrap = broker.bootstrap
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            config = {"segment.bytes": "2000", "retention.bytes": "3000"}
            assert admin.create_topics([NewTopic("trimmed", 1, 1, config=config)])["trimmed"].ok
            with Producer({"bootstrap.servers": bootstrap}) as producer:
                for i in range(100):  # one batch each, so that segments roll
                    producer.send("trimmed", b"r%03d" % i + b"." * 200, partition=0).result(30)
            tp = TopicPartition("trimmed", 0)
            deadline = time.monotonic() + 30
            while (start := admin.list_offsets({tp: OffsetSpec.earliest()})[tp].offset) == 0:
                assert time.monotonic() < deadline, "retention never ran"
                time.sleep(0.2)

        def read(fail_on_data_loss: str):
            return (
                session.read.format("onceflow")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", "trimmed")
                .option("startingOffsets", '{"trimmed": {"0": 0}}')
                .option("failOnDataLoss", fail_on_data_loss)
                .load()
                .collect()
            )

        with pytest.raises(Exception, match="trimmed-0") as failure:
            read("true")
        assert "Set failOnDataLoss=false" in str(failure.value)
        offsets = sorted(r.offset for r in read("false"))  # retention may have moved on
        assert offsets and offsets[0] >= start and offsets == list(range(offsets[0], 100))
    finally:
        broker.stop()


def _recreate(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete `topic` and create it again (a new topic id, offsets from 0)."""
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.delete_topics([topic])[topic].ok
        deadline = time.monotonic() + 30
        while not admin.create_topics([NewTopic(topic, partitions, 1)])[topic].ok:
            assert time.monotonic() < deadline, "the deleted topic could not be created again"
            time.sleep(0.2)


def test_recreated_topic_fails_the_query(session, module_broker, tmp_path):
    """A topic recreated while the query was stopped stops the restarted query with
    failOnDataLoss=true, naming the topic, partition and offsets: when the new offsets are
    below the old ones, and when they are above them (only the topic id tells)."""
    bootstrap = module_broker.bootstrap
    create_topics(bootstrap, ["reborn"], 2)
    produce(bootstrap, "reborn", [b"old-%d" % i for i in range(8)], 2)
    collector = Collector()
    checkpoint = tmp_path / "cp-reborn"
    query = _start(session, bootstrap, "reborn", collector, tmp_path, checkpoint=checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert len(collector.rows) == 8
    _recreate(bootstrap, "reborn", 2)
    for count in (2, 10):  # 1 then 6 offsets per partition; the old topic had 4
        produce(bootstrap, "reborn", [b"new-%d" % i for i in range(count)], 2)
        query = _start(session, bootstrap, "reborn", collector, tmp_path, checkpoint=checkpoint)
        try:
            with pytest.raises(Exception, match="reborn-[01] up to offset 4") as failure:
                query.processAllAvailable()
            assert "recreated" in str(failure.value)
            assert "failOnDataLoss=false" in str(failure.value)
        finally:
            query.stop()
    assert len(collector.rows) == 8


def test_recreated_topic_is_read_from_earliest(session, module_broker, tmp_path):
    """failOnDataLoss=false: the query goes on with the new topic from its first offset, both
    before and after the new topic's offsets pass the old ones."""
    bootstrap = module_broker.bootstrap
    create_topics(bootstrap, ["phoenix"], 2)
    produce(bootstrap, "phoenix", [b"old-%d" % i for i in range(8)], 2)
    collector = Collector()
    query = _start(session, bootstrap, "phoenix", collector, tmp_path, failOnDataLoss="false")
    try:
        query.processAllAvailable()
        _recreate(bootstrap, "phoenix", 2)
        produce(bootstrap, "phoenix", [b"new-%d" % i for i in range(4)], 2)
        query.processAllAvailable()
        assert sorted(collector.values()) == sorted(
            [b"old-%d" % i for i in range(8)] + [b"new-%d" % i for i in range(4)]
        )
        produce(bootstrap, "phoenix", [b"newer-%d" % i for i in range(8)], 2)
        query.processAllAvailable()
    finally:
        query.stop()
    new = [b"new-%d" % i for i in range(4)] + [b"newer-%d" % i for i in range(8)]
    assert sorted(collector.values()) == sorted([b"old-%d" % i for i in range(8)] + new)
