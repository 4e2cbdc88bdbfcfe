"""`OnceflowDataSource`: the `onceflow` format, a drop-in for Spark's `format("kafka")`.

    onceflow.spark.register(spark)
    df = (spark.readStream.format("onceflow")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders").load())
    df.writeStream.format("onceflow").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
        .option("topic", "out").option("checkpointLocation", "/tmp/cp").start()

Options, schema and the exactly-once protocol: docs/spark.md.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from onceflow.spark.options import (
    OptionError,
    parse_sink_options,
    parse_source_options,
)
from onceflow.spark.sink import KafkaBatchWriter, KafkaStreamWriter, validate_sink_schema
from onceflow.spark.source import KafkaBatchReader, KafkaStreamReader, source_schema

__all__ = ["OnceflowDataSource"]


class OnceflowDataSource(DataSource):
    """Kafka topics as a Spark source and sink, through the onceflow client."""

    @classmethod
    def name(cls) -> str:
        return "onceflow"

    def schema(self) -> str:
        value = self.options.get("includeHeaders", "false").strip().lower()
        if value not in ("true", "false"):
            raise OptionError(f"Option 'includeHeaders' must be true or false, not {value!r}")
        return source_schema(value == "true")

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(parse_source_options(self.options, batch=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(parse_source_options(self.options, batch=False))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Batch writes append (`.mode("append")`; PySpark's Python data sources know no
        ErrorIfExists, Spark's Kafka sink's default); a topic cannot be overwritten."""
        if overwrite:
            raise OptionError(
                'Save mode Overwrite is not allowed for Kafka topics; use .mode("append")'
            )
        options = parse_sink_options(self.options)
        validate_sink_schema(schema, options)
        return KafkaBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options)
        if options.job_id is not None:
            raise OptionError(
                "Option 'jobId' is for batch writes; a streaming query is identified by its "
                "checkpoint (or transactional.id.prefix)"
            )
        validate_sink_schema(schema, options)
        return KafkaStreamWriter(options)
