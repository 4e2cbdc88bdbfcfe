"""Clients kept between tasks in one Python worker (`spark.pools`), driven without Spark
against a live broker: a read task reuses the consumer that stopped where it starts, or
reassigns another, and reads exactly its range either way; a write task reuses the producer
of an earlier batch, which still takes a new epoch, so the identity it handed over to the
driver can no longer end anything; a task that fails does not give its client back."""

from __future__ import annotations

import pyarrow as pa
import pytest
from support.broker import BrokerProcess
from support.topics import create_topics, produce

from onceflow.client.errors import KafkaError
from onceflow.client.producer import Producer
from onceflow.spark import pools
from onceflow.spark.committer import commit_batch
from onceflow.spark.markers import MarkerError
from onceflow.spark.offsets import OffsetRange
from onceflow.spark.options import parse_sink_options, parse_source_options
from onceflow.spark.orders import read_committed
from onceflow.spark.source import read_range
from onceflow.spark.twophase import PreparedTransaction, TaskInfo, write_task

TIMEOUT = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("pools") / "data")
    create_topics(broker.bootstrap, ["pool-in"], 1)
    produce(broker.bootstrap, "pool-in", [b"%d" % i for i in range(300)], 1)
    create_topics(broker.bootstrap, ["pool-out", "pool-out-2"], 2)
    yield broker
    broker.stop()


@pytest.fixture(autouse=True)
def empty_pools():
    pools._consumers.clear()
    pools._producers.clear()
    yield
    pools._consumers.clear()
    pools._producers.clear()


def _read(options, start: int, until: int) -> list[bytes]:
    batches = read_range(options, OffsetRange("pool-in", 0, start, until))
    return [v for b in batches for v in b.column("value").to_pylist()]


def _source(bootstrap: str, **extra: str):
    return parse_source_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": "pool-in", **extra}, batch=False
    )


def test_read_tasks_reuse_one_consumer_and_read_exactly_their_ranges(broker):
    options = _source(broker.bootstrap)
    expect = [b"%d" % i for i in range(300)]
    before = pools.pool_stats()
    assert _read(options, 0, 100) == expect[0:100]
    assert _read(options, 100, 250) == expect[100:250]  # where the last one stopped
    assert _read(options, 20, 30) == expect[20:30]  # elsewhere: reassigned
    assert _read(options, 30, 300) == expect[30:300]
    stats = pools.pool_stats()
    hits = stats["consumer_hits"] - before["consumer_hits"]
    assert (hits, stats["consumer_misses"] - before["consumer_misses"]) == (3, 1)
    assert len(pools._consumers) == 1


def test_reuse_off_and_failed_reads_keep_no_consumer(broker):
    assert _read(_source(broker.bootstrap, reuseClients="false"), 0, 10) == [
        b"%d" % i for i in range(10)
    ]
    assert len(pools._consumers) == 0
    batches = read_range(_source(broker.bootstrap), OffsetRange("pool-in", 0, 0, 300))
    next(batches)
    batches.close()  # Spark stopped reading (a limit, a failed task)
    assert len(pools._consumers) == 0


def _sink(bootstrap: str, topic: str = "pool-out"):
    return parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic})


def _rows(values: list[bytes]):
    yield pa.RecordBatch.from_pydict({"key": [b"k"] * len(values), "value": values})


def test_a_kept_producer_fences_the_epoch_it_handed_over(broker):
    """Batch 0's task prepares and hands its transaction to the driver, which commits it;
    batch 1's task in the same worker reuses the producer. Its InitProducerId still bumps the
    epoch: the driver's identity for batch 0, replayed late, cannot commit batch 1."""
    bootstrap = broker.bootstrap
    options = _sink(bootstrap)
    hits = pools.pool_stats()["producer_hits"]
    first = write_task(options, TaskInfo("q", 0, 0, 0), "pool-q", _rows([b"a"] * 10))
    assert isinstance(first, PreparedTransaction)
    assert len(pools._producers) == 1
    commit_batch(options, [first], 0)
    second = write_task(options, TaskInfo("q", 1, 0, 0), "pool-q", _rows([b"b"] * 5))
    assert isinstance(second, PreparedTransaction)
    assert pools.pool_stats()["producer_hits"] == hits + 1
    assert (second.producer_id, second.producer_epoch) != (first.producer_id, first.producer_epoch)
    late = Producer({"bootstrap.servers": bootstrap, "transactional.id": first.transactional_id})
    late.resume_transaction(first.producer_id, first.producer_epoch)
    with pytest.raises(KafkaError):
        late.commit_transaction(TIMEOUT)
    late.close(timeout=0)
    assert sorted(r.value for r in read_committed(bootstrap, "pool-out", 2)) == [b"a"] * 10
    commit_batch(options, [second], 1)
    got = sorted(r.value for r in read_committed(bootstrap, "pool-out", 2))
    assert got == [b"a"] * 10 + [b"b"] * 5


def test_a_failed_write_task_gives_no_producer_back(broker):
    options = _sink(broker.bootstrap, "pool-out-2")

    def failing():
        yield from _rows([b"x"] * 3)
        raise RuntimeError("the task's input failed")

    with pytest.raises(RuntimeError):
        write_task(options, TaskInfo("q2", 0, 0, 0), "pool-q2", failing())
    assert len(pools._producers) == 0
    prepared = write_task(options, TaskInfo("q2", 0, 0, 0), "pool-q2", _rows([b"y"]))
    commit_batch(options, [prepared], 0)
    assert len(pools._producers) == 1
    other = TaskInfo("other-query", 0, 0, 0)  # refused after its InitProducerId
    with pytest.raises(MarkerError, match="in use by another query"):
        write_task(options, other, "pool-q2", _rows([b"z"]))
    assert len(pools._producers) == 0
