"""onceflow for Spark: a read_committed Kafka source and an exactly-once Kafka sink on
PySpark's Python Data Source API (PySpark 4.1+, the `onceflow[spark]` extra).

`register(spark)` makes them available as `format("onceflow")`; see docs/spark.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SpeculationError", "register"]


class SpeculationError(RuntimeError):
    """spark.speculation=true: the exactly-once sink refuses to run beside speculative tasks."""


def register(spark: Any) -> None:
    """Register the `onceflow` data source with a SparkSession, classic or Spark Connect.

    Refuses a session with spark.speculation=true: a speculative copy of a write task fences
    the original's transaction (InitProducerId), so whichever copy Spark keeps, the commit of
    the other's transaction fails and the query stops. Exactly-once would still hold, but the
    query could not make progress reliably."""
    from onceflow.spark.datasource import OnceflowDataSource

    if _speculation(spark).strip().lower() == "true":
        raise SpeculationError(
            "onceflow's exactly-once sink does not run with spark.speculation=true: a "
            "speculative task attempt fences the first attempt's transaction. Set "
            "spark.speculation=false for this application."
        )
    spark.dataSource.register(OnceflowDataSource)


def _speculation(spark: Any) -> str:
    """spark.speculation of the application behind `spark`. A Spark Connect session has no
    SparkContext; its conf starts from the server application's SparkConf, which is where
    spark.speculation is set (it cannot be changed on a running application)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return spark.conf.get("spark.speculation", "false") or "false"
    return spark.sparkContext.getConf().get("spark.speculation") or "false"
