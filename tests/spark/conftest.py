"""Fixtures for the Spark tests: one local SparkSession for the whole run (a JVM start costs
6-8 s), with the onceflow data source registered and Spark's own Kafka connector on its
class path (format `kafka`, for side-by-side tests), and a broker per test module."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support.broker import BrokerProcess
from support.kafka_cluster import KafkaUnavailable, spark_kafka_jars
from support.peers import KAFKA_TV2, ONCEFLOW, TRANSACTION_VERSION

from spark.pipeline_helpers import Pipeline


@pytest.fixture(scope="session")
def session():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import onceflow.spark

    try:
        jars = ",".join(spark_kafka_jars())
    except KafkaUnavailable as exc:
        pytest.fail(str(exc))
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    onceflow.spark.register(spark)
    yield spark
    spark.stop()


@pytest.fixture(autouse=True, scope="module")
def _close_kept_clients():
    """The sink and source keep clients between batches in the process that ran them (here
    the test process too); closed after each module, whose brokers then stop, so that no
    client goes on retrying a stopped broker for the rest of the run."""
    yield
    from onceflow.spark import committer, pools

    committer._committers.clear()
    pools._consumers.clear()
    pools._producers.clear()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("broker") / "data")
    yield broker
    broker.stop()


# The sink's crash tests run on onceflow's broker and on a 3-node Kafka cluster with
# transaction version 2 (Kafka 4.x's default); a test narrows this with
# `@pytest.mark.parametrize("pipeline", [...], indirect=True)`.
SINK_PEERS = [ONCEFLOW, pytest.param(KAFKA_TV2, marks=pytest.mark.kafka)]
ORDERS = 900


@pytest.fixture(params=SINK_PEERS)
def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> Pipeline:
    """The demo pipeline's topics, fed with ORDERS orders, on a fresh onceflow broker or on a
    shared 3-node Apache Kafka cluster (replication factor 3, min.insync.replicas 2)."""
    if request.param == ONCEFLOW:
        broker = BrokerProcess(tmp_path / "broker" / "data")
        p = Pipeline(broker.bootstrap, tmp_path)
        p.broker = broker  # type: ignore[attr-defined]
    else:
        clusters = request.getfixturevalue("kafka_clusters")
        cluster = clusters.get(3, TRANSACTION_VERSION[request.param])
        suffix = tmp_path.name
        p = Pipeline(cluster.bootstrap, tmp_path, input=f"orders-{suffix}",
                     output=f"validated-{suffix}", replication_factor=3)  # fmt: skip
        p.cluster = cluster
        broker = None
    try:
        p.create_topics()
        p.feed(ORDERS)
        yield p
    finally:
        if broker is not None:
            broker.stop()
