"""Rows of Spark's Kafka sink columns, from Arrow record batches to a send callable."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["Delivery", "RowSink", "non_empty", "send_arrow_batch"]

RowSink = Callable[[Any, Any, Any, Any, Any], None]  # send(topic, value, key, partition, headers)


def send_arrow_batch(batch: Any, default_topic: str | None, send: RowSink) -> int:
    """Send every row of an Arrow record batch with Spark's Kafka sink columns."""
    names = batch.schema.names
    n: int = batch.num_rows
    values = batch.column(names.index("value")).to_pylist()
    keys = batch.column(names.index("key")).to_pylist() if "key" in names else [None] * n
    if "topic" in names:
        topics = batch.column(names.index("topic")).to_pylist()
    else:
        topics = [default_topic] * n
    if default_topic is not None and "topic" in names:
        topics = [default_topic] * n  # the option overrides the column, as in Spark
    partitions = (
        batch.column(names.index("partition")).to_pylist() if "partition" in names else [None] * n
    )
    if "headers" in names:
        headers = [
            [(h["key"], h["value"]) for h in row] if row else None
            for row in batch.column(names.index("headers")).to_pylist()
        ]
    else:
        headers = [None] * n
    for topic, value, key, partition, row_headers in zip(
        topics, values, keys, partitions, headers, strict=True
    ):
        if topic is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        send(topic, value, key, partition, row_headers)
    return n


def non_empty(batches: Iterable[Any]) -> Iterator[Any]:
    return (b for b in batches if b.num_rows)


class Delivery:
    """Collects the first delivery failure of a task's records."""

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def __call__(self, error: Any, _metadata: Any) -> None:
        if error is not None and self.error is None:
            self.error = error

    def check(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"a record could not be written: {self.error}") from self.error
