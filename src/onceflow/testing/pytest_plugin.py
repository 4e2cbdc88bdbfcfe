"""pytest fixtures for testing pipelines against onceflow, registered as a pytest plugin when
onceflow is installed (the `pytest11` entry point):

- `onceflow_broker`: a `TestBroker` (`onceflow.testing`) shared by the tests of a module; use
  topic names unique per test;
- `onceflow_spark`: a local SparkSession (`local[2]`) with the `onceflow` data source, shared
  by the whole test run (a Spark start costs several seconds); needs `onceflow[spark]` and Java.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from onceflow.testing import TestBroker, embedded_broker, spark_session


@pytest.fixture(scope="module")
def onceflow_broker() -> Iterator[TestBroker]:
    """An embedded onceflow broker for this test module (`onceflow.testing.TestBroker`)."""
    with embedded_broker() as broker:
        yield broker


@pytest.fixture(scope="session")
def onceflow_spark() -> Iterator[Any]:
    """A local[2] SparkSession with the onceflow data source, for the whole test run."""
    with spark_session(spark_sql_shuffle_partitions="2") as spark:
        yield spark
