"""The sink against `transaction.timeout.ms` (issue 19, item 4): a task whose input is slow
(skew) opens its transaction only once its rows are read, and a batch that outlives the timeout
fails with an error naming the setting and the broker's maximum. Driven through the protocol
against a broker that aborts timed-out transactions every 100 ms."""

from __future__ import annotations

import time
from collections import Counter

import pyarrow as pa
import pytest
from support.broker import BrokerProcess

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.spark.committer import SinkCommitError, abort_batch, commit_batch
from onceflow.spark.options import parse_sink_options
from onceflow.spark.orders import read_committed, wait_until_stable
from onceflow.spark.twophase import TaskInfo, write_task

TIMEOUT_MS = 1000


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    config = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}
    broker = BrokerProcess(tmp_path_factory.mktemp("timeouts") / "data", config)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        for name in ("to-skew", "to-slow-batch"):
            assert admin.create_topics([NewTopic(name, 1, 1)])[name].ok
    yield broker.bootstrap
    broker.stop()


def _options(bootstrap: str, topic: str):
    return parse_sink_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": topic,
            "kafka.transaction.timeout.ms": str(TIMEOUT_MS),
        }
    )


def _batch(ids: range):
    return pa.RecordBatch.from_pydict({"key": [b"k"] * len(ids), "value": [b"%d" % i for i in ids]})


def _values(bootstrap: str, topic: str) -> Counter:
    assert wait_until_stable(bootstrap, topic, 1), f"a transaction stays open on {topic}"
    return Counter(int(r.value) for r in read_committed(bootstrap, topic, 1))


def test_a_skewed_task_slower_than_the_timeout_still_commits(bootstrap):
    """The task's upstream work (here: its input, paused for three timeouts between two
    record batches) takes longer than transaction.timeout.ms; its transaction does not."""
    options = _options(bootstrap, "to-skew")

    def slow_input():
        yield _batch(range(0, 10))
        time.sleep(3 * TIMEOUT_MS / 1000)  # the skewed part of the task
        yield _batch(range(10, 20))

    message = write_task(options, TaskInfo("q-skew", 0, 0, 0), "t-skew", slow_input())
    commit_batch(options, [message], 0)
    assert _values(bootstrap, "to-skew") == Counter(range(20))


def test_a_batch_longer_than_the_timeout_fails_naming_the_settings(bootstrap):
    """A task prepared its share, and the batch (later task waves) took longer than the
    timeout before the driver's commit: the broker aborted the transaction. The commit fails
    naming kafka.transaction.timeout.ms and transaction.max.timeout.ms; a restart of the
    batch writes it exactly once."""
    options = _options(bootstrap, "to-slow-batch")
    message = write_task(options, TaskInfo("q-slow", 0, 0, 0), "t-slow", iter([_batch(range(5))]))
    # until the broker has aborted the transaction
    assert wait_until_stable(bootstrap, "to-slow-batch", 1), "the transaction was never aborted"
    with pytest.raises(SinkCommitError) as raised:
        commit_batch(options, [message], 0)
    text = str(raised.value)
    assert "kafka.transaction.timeout.ms=1000" in text and "transaction.max.timeout.ms" in text
    assert "open for" in text, text
    abort_batch(options, [message], 0, "t-slow")
    again = write_task(options, TaskInfo("q-slow", 0, 0, 0), "t-slow", iter([_batch(range(5))]))
    commit_batch(options, [again], 0)
    assert _values(bootstrap, "to-slow-batch") == Counter(range(5))
