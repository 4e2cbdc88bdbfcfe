"""The sink's two-phase protocol without Spark (tasks and driver calls made directly, against a
live broker), its column checks, and the speculation and transaction-timeout refusals."""

from __future__ import annotations

import types

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)
from support.broker import BrokerProcess

import onceflow.spark
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.errors import KafkaConnectionError, KafkaTimeoutError
from onceflow.client.producer import Producer
from onceflow.spark import outcome
from onceflow.spark.committer import SinkCommitError, abort_batch, commit_batch
from onceflow.spark.options import OptionError, parse_sink_options
from onceflow.spark.orders import end_offsets, read_committed
from onceflow.spark.sink import validate_sink_schema
from onceflow.spark.twophase import (
    AlreadyCommitted,
    NothingToCommit,
    PreparedTransaction,
    TaskInfo,
    fence,
    write_task,
)


@pytest.fixture(scope="module")
def sink_broker(tmp_path_factory):
    broker = BrokerProcess(
        tmp_path_factory.mktemp("sink") / "data",
        {"transaction.max.timeout.ms": 400_000, "transaction.state.log.num.partitions": 4},
    )
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        for name in ("sink-a", "sink-b", "sink-c", "sink-d"):
            assert admin.create_topics([NewTopic(name, 2, 1)])[name].ok
    yield broker
    broker.stop()


def _options(bootstrap: str, topic: str, **extra: str):
    return parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic, **extra})


def _batches(values: list[bytes], size: int = 10):
    for i in range(0, len(values), size):
        chunk = values[i : i + size]
        yield pa.RecordBatch.from_pydict({"key": [b"k"] * len(chunk), "value": chunk})


def test_prepared_tasks_commit_once_even_when_the_driver_commits_twice(sink_broker):
    bootstrap = sink_broker.bootstrap
    options = _options(bootstrap, "sink-a")
    values = [[b"p0-%d" % i for i in range(25)], [b"p1-%d" % i for i in range(30)]]
    messages = [
        write_task(options, TaskInfo("q1", 0, p, 0), "test-q1", _batches(values[p]))
        for p in range(2)
    ]
    assert all(isinstance(m, PreparedTransaction) for m in messages)
    assert read_committed(bootstrap, "sink-a", 2) == []  # nothing visible before the commit
    commit_batch(options, messages, 0)
    commit_batch(options, messages, 0)  # a restarted driver commits the batch again
    # a re-run of the batch finds its markers and writes nothing
    rerun = write_task(options, TaskInfo("q1", 0, 0, 0), "test-q1", _batches(values[0]))
    assert isinstance(rerun, AlreadyCommitted)
    got = sorted(r.value for r in read_committed(bootstrap, "sink-a", 2))
    assert got == sorted(values[0] + values[1])
    assert end_offsets(bootstrap, "sink-a", 2, True) == end_offsets(bootstrap, "sink-a", 2, False)


def test_abort_fences_tasks_that_returned_nothing(sink_broker):
    """A task that died after writing (no message) leaves an open transaction; abort_batch
    aborts it through the transactional id derived from the prefix."""
    bootstrap = sink_broker.bootstrap
    options = _options(bootstrap, "sink-b")
    write_task(options, TaskInfo("q2", 3, 0, 0), "test-q2", _batches([b"lost"] * 20))
    lso, hw = (end_offsets(bootstrap, "sink-b", 2, c) for c in (True, False))
    assert lso != hw  # the prepared transaction pins the last stable offset
    abort_batch(options, [None], 3, "test-q2")
    assert end_offsets(bootstrap, "sink-b", 2, True) == end_offsets(bootstrap, "sink-b", 2, False)
    assert read_committed(bootstrap, "sink-b", 2) == []


@pytest.mark.parametrize(
    ("guarantee", "linger_ms"),
    [("exactly_once", "5"), ("exactly_once", "3000"), ("at_least_once", "5")],
)
def test_a_record_the_broker_rejects_fails_the_task(sink_broker, guarantee, linger_ms):
    """A batch over the topic's max.message.bytes is refused by the broker: the task raises,
    and in exactly_once mode its transaction is aborted (nothing visible, nothing open).
    With a long linger the records go out only at the flush, after the progress marker
    joined the transaction: the refusal must still fail the task."""
    bootstrap = sink_broker.bootstrap
    topic = f"small-{guarantee}-{linger_ms}".replace("_", "-")
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        new = NewTopic(topic, 1, 1, config={"max.message.bytes": "2000"})
        assert admin.create_topics([new])[topic].ok
    options = _options(
        bootstrap, topic, deliveryGuarantee=guarantee, **{"kafka.linger.ms": linger_ms}
    )
    values = [b"small"] * 5 + [b"x" * 5000]
    with pytest.raises(Exception, match="MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE|too large"):
        write_task(options, TaskInfo("q6", 0, 0, 0), f"test-q6-{guarantee}", _batches(values, 1))
    if guarantee == "exactly_once":
        assert read_committed(bootstrap, topic, 1) == []
        assert end_offsets(bootstrap, topic, 1, True) == end_offsets(bootstrap, topic, 1, False)


def test_commit_refuses_a_batch_with_a_failed_task(sink_broker):
    options = _options(sink_broker.bootstrap, "sink-c")
    with pytest.raises(SinkCommitError, match="no commit message from tasks \\[1\\]"):
        commit_batch(options, [NothingToCommit(0, 0), None], 5)


def test_empty_task_opens_no_transaction(sink_broker):
    options = _options(sink_broker.bootstrap, "sink-c")
    message = write_task(options, TaskInfo("q3", 0, 0, 0), "test-q3", iter([]))
    assert message == NothingToCommit(0, 0, None, "q3", "test-q3")


def test_transaction_timeout_above_the_broker_maximum_is_a_clear_error(sink_broker):
    options = _options(
        sink_broker.bootstrap, "sink-d", **{"kafka.transaction.timeout.ms": "600000"}
    )
    with pytest.raises(RuntimeError, match="transaction.max.timeout.ms"):
        write_task(options, TaskInfo("q4", 0, 0, 0), "test-q4", _batches([b"x"]))


def test_at_least_once_writes_without_transactions(sink_broker):
    bootstrap = sink_broker.bootstrap
    options = _options(bootstrap, "sink-d", deliveryGuarantee="at_least_once")
    message = write_task(options, TaskInfo("q5", 0, 1, 0), "unused", _batches([b"a"] * 12))
    assert message == NothingToCommit(1, 12)
    assert len(read_committed(bootstrap, "sink-d", 2)) == 12


FIELDS = {
    "value": StructField("value", BinaryType()),
    "svalue": StructField("value", StringType()),
    "key": StructField("key", StringType()),
    "topic": StructField("topic", StringType()),
    "partition": StructField("partition", IntegerType()),
    "bad_partition": StructField("partition", LongType()),
    "headers": StructField(
        "headers",
        ArrayType(
            StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        ),
    ),
    "bad_headers": StructField("headers", ArrayType(StringType())),
    "bad_key": StructField("key", IntegerType()),
}


@pytest.mark.parametrize(
    "columns, options, error",
    [
        (["value", "key", "partition", "headers"], {"topic": "t"}, None),
        (["svalue", "topic"], {"progressTopic": "t"}, None),
        (["svalue", "topic"], {"deliveryGuarantee": "at_least_once"}, None),
        (["key"], {"topic": "t"}, "Required attribute 'value'"),
        (["value"], {}, "topic option required"),
        (["value", "topic"], {}, "progressTopic"),
        (["value", "bad_partition"], {"topic": "t"}, "partition attribute type must be int"),
        (["value", "bad_headers"], {"topic": "t"}, "headers attribute type"),
        (["value", "bad_key"], {"topic": "t"}, "key attribute type"),
    ],
)
def test_sink_columns_are_checked_at_start(columns, options, error):
    schema = StructType([FIELDS[c] for c in columns])
    parsed = parse_sink_options({"kafka.bootstrap.servers": "x:1", **options})
    if error is None:
        validate_sink_schema(schema, parsed)
    else:
        with pytest.raises(OptionError, match=error):
            validate_sink_schema(schema, parsed)


def test_register_refuses_speculation():
    conf = {"spark.speculation": "true"}
    spark = types.SimpleNamespace(
        sparkContext=types.SimpleNamespace(getConf=lambda: conf),
        dataSource=types.SimpleNamespace(register=lambda cls: pytest.fail("registered")),
    )
    with pytest.raises(onceflow.spark.SpeculationError, match="spark.speculation=false"):
        onceflow.spark.register(spark)


@pytest.mark.parametrize(
    "options, error",
    [
        ({"jobId": " "}, "non-empty"),
        ({"jobId": "j", "deliveryGuarantee": "at_least_once"}, "exactly_once"),
    ],
)
def test_job_id_is_checked(options, error):
    with pytest.raises(OptionError, match=error):
        parse_sink_options({"kafka.bootstrap.servers": "x:1", "topic": "t", **options})


def test_job_id_is_refused_on_a_stream():
    from onceflow.spark.datasource import OnceflowDataSource

    source = OnceflowDataSource({"kafka.bootstrap.servers": "x:1", "topic": "t", "jobId": "j"})
    schema = StructType([FIELDS["value"]])
    assert source.writer(schema, False).prefix == "onceflow-job-j"
    with pytest.raises(OptionError, match="for batch writes"):
        source.streamWriter(schema, False)


def _prepared(options, query: str, batch: int = 0):
    values = [b"%s-%d" % (query.encode(), i) for i in range(12)]
    message = write_task(options, TaskInfo(query, batch, 0, 0), f"test-{query}", _batches(values))
    assert isinstance(message, PreparedTransaction)
    return message, values


def _commit_then(monkeypatch, before=None, commit: bool = True, times: int = 1):
    """The driver's next `times` commits fail with a timeout: `before(producer)` runs first,
    then the real commit when `commit`; later commits go through."""
    real = Producer.commit_transaction
    calls = []

    def commit_transaction(self, timeout=None):
        calls.append(self.transactional_id)
        if len(calls) > times:
            return real(self, timeout)
        if before is not None:
            before(self)
        if commit:
            real(self, timeout)
        raise KafkaTimeoutError("Timed out waiting for EndTxn (injected)")

    monkeypatch.setattr(Producer, "commit_transaction", commit_transaction)
    return calls


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "still-open"])
def test_a_timed_out_commit_is_resolved_before_it_is_reported(sink_broker, monkeypatch, committed):
    """EndTxn times out after the commit (the answer was lost) or before it (nothing sent):
    the driver asks the marker and the coordinator, finds it committed (done) or still open
    (committed again), and the batch's rows are in the output once."""
    bootstrap, query = sink_broker.bootstrap, f"lost-{committed}"
    options = _options(bootstrap, "sink-c")
    before = set(r.value for r in read_committed(bootstrap, "sink-c", 2))
    message, values = _prepared(options, query)
    calls = _commit_then(monkeypatch, commit=committed)
    commit_batch(options, [message], 0)
    assert len(calls) == (1 if committed else 2)
    got = [r.value for r in read_committed(bootstrap, "sink-c", 2) if r.value not in before]
    assert sorted(got) == sorted(values)


def test_a_timed_out_commit_of_an_aborted_transaction_says_so(sink_broker, monkeypatch):
    """The transaction was fenced (a later attempt) and the commit timed out: the error says
    the rows are not in the output, and they are not."""
    bootstrap = sink_broker.bootstrap
    options = _options(bootstrap, "sink-c")
    message, values = _prepared(options, "fenced")
    _commit_then(monkeypatch, before=lambda p: fence(options, message.transactional_id),
                 commit=False)  # fmt: skip
    with pytest.raises(SinkCommitError, match="Its rows are not in the output"):
        commit_batch(options, [message], 0)
    assert not set(values) & {r.value for r in read_committed(bootstrap, "sink-c", 2)}


def test_a_commit_whose_outcome_cannot_be_learned_says_so(sink_broker, monkeypatch):
    """Neither the marker nor the coordinator answers: the error says the rows may or may
    not be in the output and that a restart, not a manual rewrite, settles it."""
    options = _options(sink_broker.bootstrap, "sink-d")
    message, _ = _prepared(options, "unknown")
    _commit_then(monkeypatch, commit=False)

    def unreachable(*args, **kwargs):
        raise KafkaConnectionError("connection refused (injected)")

    monkeypatch.setattr(outcome, "read_marker", unreachable)
    with pytest.raises(SinkCommitError, match="may or may not be in the output") as info:
        commit_batch(options, [message], 0)
    assert "restart the query from its checkpoint" in str(info.value)
    monkeypatch.undo()
    abort_batch(options, [message], 0, "test-unknown")
