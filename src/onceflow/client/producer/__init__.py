"""The producer: `Producer` (`producer`), the record accumulator and batch writer, the
partitioner, record futures, the sender on the I/O thread, the idempotent producer's state
(`idempotence`) and transactions (`txn`).

`onceflow.client.producer.Producer` is the documented path of the producer."""

from onceflow.client.producer.producer import Producer

__all__ = ["Producer"]
