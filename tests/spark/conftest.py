"""Fixtures for the Spark tests: one local SparkSession for the whole run (a JVM start costs
6-8 s), with the onceflow data source registered and Spark's own Kafka connector on its
class path (format `kafka`, for side-by-side tests), and a broker per test module."""

from __future__ import annotations

import os
import sys

import pytest
from support.broker import BrokerProcess
from support.kafka_cluster import KafkaUnavailable, spark_kafka_jars


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


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("broker") / "data")
    yield broker
    broker.stop()
