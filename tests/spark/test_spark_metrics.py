"""The connector's figures: what reaches Spark's StreamingQueryProgress (the source's
offsets-behind-latest summary in its reported latest offset) and the driver-side Prometheus
endpoint (`metricsPort`): counters summed over the driver's Python processes, gauges from the
last one to set them, the sink's commits, aborts, commit time and the output's LSO lag, the
source's offsets behind latest per partition."""

from __future__ import annotations

import json
import socket
import time
import urllib.request
import uuid

import pyarrow as pa
import pytest
from support.broker import BrokerProcess
from support.prometheus import parse_samples
from support.topics import create_topics, produce

from onceflow.spark import metrics
from onceflow.spark.committer import abort_batch, commit_batch
from onceflow.spark.options import parse_sink_options
from onceflow.spark.twophase import TaskInfo, write_task


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, float]:
    """`name{labels}` -> value of every sample the endpoint serves."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse_samples(answer.read().decode())


def test_counters_add_up_over_processes_and_gauges_take_the_last(tmp_path):
    port = free_port()
    first, second = metrics.Recorder(port), metrics.Recorder(port)
    first.path = metrics.metrics_dir(port) / "1.json"  # two driver processes
    second.path = metrics.metrics_dir(port) / "2.json"
    name = "onceflow_spark_sink_transactions_committed_total"
    first.add(name, {"prefix": "p"}, 3)
    first.set("onceflow_spark_sink_last_committed_batch", {"prefix": "p"}, 7)
    first.flush()
    second.add(name, {"prefix": "p"}, 2)
    second.set("onceflow_spark_sink_last_committed_batch", {"prefix": "p"}, 8)
    second.flush()
    got = scrape(port)
    assert got[f'{name}{{prefix="p"}}'] == 5
    assert got['onceflow_spark_sink_last_committed_batch{prefix="p"}'] == 8
    first.set("onceflow_spark_sink_last_committed_batch", {"prefix": "p"}, 9)
    first.flush()
    assert scrape(port)['onceflow_spark_sink_last_committed_batch{prefix="p"}'] == 9


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("metrics") / "data")
    create_topics(broker.bootstrap, ["m-out", "m-in", "m-sunk"], 2)
    yield broker
    broker.stop()


def _rows(values: list[bytes]):
    yield pa.RecordBatch.from_pydict({"key": [b"k"] * len(values), "value": values})


def test_sink_reports_commits_aborts_and_the_lso_lag_of_its_output(broker):
    port = free_port()
    bootstrap = broker.bootstrap
    options = parse_sink_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": "m-out", "metricsPort": str(port)}
    )
    # another writer's open transaction on partition 0 holds the output's LSO back
    stuck = write_task(options, TaskInfo("other", 0, 0, 0), "m-other", _rows([b"s"] * 4))
    messages = [
        write_task(options, TaskInfo("q", 0, p, 0), "m-q", _rows([b"v"] * 10)) for p in range(2)
    ]
    commit_batch(options, messages, 0)
    got = scrape(port)
    assert got['onceflow_spark_sink_transactions_committed_total{prefix="m-q"}'] == 2
    assert got['onceflow_spark_sink_batches_committed_total{prefix="m-q"}'] == 1
    assert got['onceflow_spark_sink_last_committed_batch{prefix="m-q"}'] == 0
    assert got['onceflow_spark_sink_last_commit_seconds{prefix="m-q"}'] > 0
    lags = [
        got[f'onceflow_spark_sink_output_lso_lag{{topic="m-out",partition="{p}"}}'] for p in (0, 1)
    ]
    assert max(lags) > 0  # the other writer's transaction, still open
    abort_batch(options, [stuck], 0, "m-other")
    messages = [
        write_task(options, TaskInfo("q", 1, p, 0), "m-q", _rows([b"w"] * 10)) for p in range(2)
    ]
    commit_batch(options, messages, 1)
    deadline = time.monotonic() + 10
    while True:
        got = scrape(port)
        lags = [
            got[f'onceflow_spark_sink_output_lso_lag{{topic="m-out",partition="{p}"}}']
            for p in (0, 1)
        ]
        if lags == [0, 0] or time.monotonic() > deadline:
            break
        commit_batch(options, messages, 1)  # measured again after a replayed commit
    assert lags == [0, 0]
    assert got['onceflow_spark_sink_transactions_aborted_total{prefix="m-other"}'] == 1
    assert got['onceflow_spark_sink_last_committed_batch{prefix="m-q"}'] == 1
    assert got['onceflow_spark_sink_transactions_committed_total{prefix="m-q"}'] >= 4


@pytest.mark.slow
def test_a_streaming_query_reports_into_its_progress_and_the_endpoint(session, broker, tmp_path):
    bootstrap = broker.bootstrap
    produce(bootstrap, "m-in", [b"%d" % i for i in range(400)], 2)
    port = free_port()
    query = (
        session.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "m-in")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .option("metricsPort", str(port))
        .load()
        .selectExpr("key", "value")
        .writeStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "m-sunk")
        .option("transactional.id.prefix", f"m-{uuid.uuid4().hex[:8]}")
        .option("metricsPort", str(port))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .start()
    )
    try:
        query.processAllAvailable()
        progress = [p for p in query.recentProgress if p.numInputRows > 0]
        got = scrape(port)  # served by one of the query's driver-side Python processes
    finally:
        query.stop()
    assert len(progress) >= 4
    first = progress[0]
    latest = json.loads(first.sources[0].latestOffset)
    assert latest["m-in"] == {"0": 200, "1": 200}
    assert int(latest["@metrics"]["maxOffsetsBehindLatest"]) > 0  # 400 offsets, 100 a batch
    last = json.loads(progress[-1].sources[0].latestOffset)
    assert last["@metrics"]["maxOffsetsBehindLatest"] == "0"
    prefix = [k for k in got if k.startswith("onceflow_spark_sink_batches_committed_total")]
    assert prefix and got[prefix[0]] >= 4
    assert got['onceflow_spark_source_offsets_behind_latest{topic="m-in",partition="0"}'] == 0
