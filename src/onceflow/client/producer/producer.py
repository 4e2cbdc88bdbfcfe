"""`Producer`: Kafka's producer with a synchronous API and a background I/O thread.

    with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        future = producer.send("events", b"value", key=b"k")
        metadata = future.result(timeout=10)      # RecordMetadata(topic, partition, offset, ts)
        producer.flush()

Configuration uses Kafka's property names (see `client.config`); idempotence is on by default,
as in Kafka 3.0+. `send` appends the record to its partition's batch and returns at once with
a future; the I/O thread (`Sender` on an asyncio loop) batches, compresses, sends, retries and
completes the futures. Keys and values are bytes-like (str is encoded as UTF-8), headers a list
of `(str, bytes)` pairs or a dict. The partition is the given one, else murmur2 of the key as
Kafka's default partitioner computes it, else the topic's sticky partition (KIP-480).

With `transactional.id` the producer is transactional (Kafka's API, confluent-kafka's names):

    producer.init_transactions(timeout)          # once: fences older producers with the id
    producer.begin_transaction()
    producer.send(...)                           # any number of records, any partitions
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), timeout)
    producer.commit_transaction(timeout)         # or abort_transaction(timeout)

A call that times out raises `KafkaTimeoutError` and may be made again to go on waiting (a
commit that timed out is retried, never turned into an abort). An error that dooms the
transaction raises `TransactionAbortableError` (`txn_requires_abort`): call
`abort_transaction`. Fatal errors (`ProducerFencedError` when a newer producer took over the
transactional id, authorization, unsupported versions) have `fatal` set: close the producer.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from onceflow.client.config import producer_config
from onceflow.client.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    MessageTooLargeError,
)
from onceflow.client.net.io_thread import IOThread
from onceflow.client.net.metadata import Metadata
from onceflow.client.net.network import NetworkClient
from onceflow.client.offsets import ConsumerGroupMetadata, Offsets, normalize_offsets
from onceflow.client.producer.accumulator import RECORD_OVERHEAD, RecordAccumulator
from onceflow.client.producer.futures import FutureRecordMetadata, RecordMetadata
from onceflow.client.producer.idempotence import TransactionManager
from onceflow.client.producer.partitioner import StickyPartitionCache, default_partition
from onceflow.client.producer.sender import Sender
from onceflow.client.producer.states import TxnApi
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.records.batch import HEADER_SIZE
from onceflow.records.compression import CompressionType

__all__ = ["Producer", "RecordMetadata"]

log = logging.getLogger(__name__)
_ids = itertools.count(1)
_time_ns = time.time_ns

DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], Any]


# a record's key, value or header value: bytes, or str (sent as UTF-8)
RecordData = bytes | bytearray | memoryview | str
Headers = Mapping[str, RecordData | None] | Iterable[tuple[str, RecordData | None]]


def _to_bytes(data: object, what: str) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"record {what} must be bytes, str or None, not {type(data).__name__}")


def _headers(headers: Headers) -> Sequence[tuple[str, bytes | None]]:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k), _to_bytes(v, "header value")) for k, v in items]


class Producer:
    """A thread-safe Kafka producer (one I/O thread per instance)."""

    def __init__(self, config: Mapping[str, Any]):
        self.config = producer_config(config)
        self.transactional_id = self.config["transactional.id"]
        self.client_id = self.config["client.id"] or f"producer-{next(_ids)}"
        self._max_block_s = self.config["max.block.ms"] / 1000
        self._max_request_size = self.config["max.request.size"]
        self.idempotent = bool(self.config["enable.idempotence"])
        self.metadata = Metadata(
            self.config["metadata.max.age.ms"],
            self.config["retry.backoff.ms"],
            self.config["retry.backoff.max.ms"],
        )
        self.network = NetworkClient(self.config, self.metadata)
        self.network.client_id = self.client_id
        if self.transactional_id is not None:
            self.txn: TransactionManager | None = TxnManager(
                self.transactional_id,
                self.config["transaction.timeout.ms"],
                self.config["retry.backoff.ms"],
                self.config["retry.backoff.max.ms"],
            )
        else:
            self.txn = TransactionManager() if self.idempotent else None
        self._io = IOThread(
            f"onceflow-producer-network-thread | {self.client_id}", lambda io: self._sender.run(io)
        )
        self.accumulator = RecordAccumulator(
            batch_size=self.config["batch.size"],
            linger_ms=self.config["linger.ms"],
            compression=CompressionType[self.config["compression.type"].upper()],
            retry_backoff_ms=self.config["retry.backoff.ms"],
            retry_backoff_max_ms=self.config["retry.backoff.max.ms"],
            buffer_memory=self.config["buffer.memory"],
            max_block_ms=self.config["max.block.ms"],
            wakeup=self._io.wakeup,
            transactional=self.transactional_id is not None,
        )
        self._sender = Sender(self.config, self.accumulator, self.network, self.txn)
        self._sticky = StickyPartitionCache()
        self._closed = False
        self._ignore_keys = self.config["partitioner.ignore.keys"]
        self._partition_counts: dict[str, int] = {}
        self._metadata_version = -1
        self._io.start()

    # ------------------------------------------------------------------ sending

    def send(
        self,
        topic: str,
        value: RecordData | None = None,
        key: RecordData | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> FutureRecordMetadata:
        """Queue a record; returns a future of its `RecordMetadata`.

        Blocks only for metadata of a new topic or for buffer space (both bounded by
        max.block.ms, then `KafkaTimeoutError`). `on_delivery(error, metadata)` runs on the
        I/O thread once the record is written or has failed."""
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        txn = self.txn
        add_partition = None
        if isinstance(txn, TxnManager):  # transactional.id set
            add_partition = txn.maybe_add_partition
            txn.check_call(TxnApi.SEND)  # raises unless a transaction is open
        elif txn is not None and txn.last_error is not None:
            raise txn.last_error
        key_bytes = key if key is None or type(key) is bytes else _to_bytes(key, "key")
        value_bytes = value if value is None or type(value) is bytes else _to_bytes(value, "value")
        record_headers = _headers(headers) if headers else ()
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        elif timestamp < 0:
            raise ValueError(
                f"Invalid timestamp: {timestamp}. Timestamp should always be non-negative or null."
            )
        num_partitions = self._partition_counts.get(topic)
        if num_partitions is None or self._metadata_version != self.metadata.version:
            num_partitions = self._partition_count(topic)
        size = RECORD_OVERHEAD + HEADER_SIZE + (len(value_bytes) if value_bytes is not None else 0)
        if key_bytes is not None:
            size += len(key_bytes)
        if record_headers:
            size += sum(len(k) + len(v or b"") for k, v in record_headers)
        if size > self._max_request_size:
            raise MessageTooLargeError(
                f"The message is {size} bytes when serialized which is larger than "
                f"{self._max_request_size}, which is the value of the max.request.size "
                "configuration."
            )
        append = self.accumulator.append
        if partition is not None:
            if not 0 <= partition < num_partitions:
                raise ValueError(
                    f"Invalid partition given with record: {partition} is not in the range "
                    f"[0...{num_partitions})."
                )
            if add_partition is not None:
                add_partition((topic, partition))
            future = append((topic, partition), timestamp, key_bytes, value_bytes, record_headers)
        elif key_bytes is not None and not self._ignore_keys:
            partition = default_partition(key_bytes, num_partitions)
            if add_partition is not None:
                add_partition((topic, partition))
            future = append((topic, partition), timestamp, key_bytes, value_bytes, record_headers)
        else:
            available = self.metadata.cluster.topics[topic].available_partitions
            partition = self._sticky.partition(topic, num_partitions, available)
            if add_partition is not None:
                add_partition((topic, partition))
            queued = append(
                (topic, partition), timestamp, key_bytes, value_bytes, record_headers, True
            )
            if queued is None:  # a new batch would open: move the sticky partition (KIP-480)
                partition = self._sticky.next_partition(topic, num_partitions, available, partition)
                if add_partition is not None:
                    add_partition((topic, partition))
                queued = append(
                    (topic, partition), timestamp, key_bytes, value_bytes, record_headers
                )
            future = queued
        if on_delivery is not None:
            future.add_delivery_callback(on_delivery)
        return future

    def _partition_count(self, topic: str) -> int:
        """The topic's partition count, waiting for metadata if needed (cached per version)."""
        version = self.metadata.version
        count = self.metadata.cluster.partition_count(topic)
        if count is None:
            count = self.metadata.wait_for_topic(topic, self._max_block_s, self._io.wakeup)
            version = self.metadata.version
        if version != self._metadata_version:
            self._partition_counts.clear()
            self._metadata_version = version
        self._partition_counts[topic] = count
        return count

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition indexes (waits for metadata up to max.block.ms)."""
        self.metadata.wait_for_topic(topic, self._max_block_s, self._io.wakeup)
        return sorted(self.metadata.cluster.topics[topic].partitions)

    # ------------------------------------------------------------------ transactions

    def _txn_manager(self, operation: str) -> TxnManager:
        if self._closed:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        if not isinstance(self.txn, TxnManager):
            raise IllegalStateError(
                f"Cannot use transactional methods ({operation}) without enabling transactions "
                "by setting the transactional.id configuration property"
            )
        return self.txn

    def _await(self, result: Any, timeout: float | None) -> None:
        self._io.wakeup()
        result.wait(self._max_block_s if timeout is None else timeout)

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id with its coordinator: fences any older producer
        with the same id and completes (aborts) what it left open. Once per producer;
        `timeout` seconds (default max.block.ms) bound the wait."""
        self._await(self._txn_manager("init_transactions").begin_init(), timeout)

    def resume_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """Take over an open transaction of this transactional id that another producer
        instance started and left open, identified by its `producer_id` and
        `producer_epoch` (for two-phase commit: tasks write and leave the transaction open,
        a coordinator process commits it; Flink's Kafka sink does the same). Call it on a
        new producer instead of `init_transactions` (which would abort that transaction),
        then call `commit_transaction` or `abort_transaction`; no records may be sent. A
        producer that only resumes may resume the next transaction of its transactional id
        once the previous one is committed or aborted.

        Kafka's answers make a repeated commit harmless: committing a transaction that is
        already committed with the same id and epoch succeeds; one that was aborted, or
        whose epoch was bumped since (a newer producer, a transaction timeout), raises
        `ProducerFencedError` or `KafkaError(INVALID_TXN_STATE)`, and nothing is committed."""
        self._txn_manager("resume_transaction").resume_transaction(producer_id, producer_epoch)

    def hand_over_transaction(self) -> None:
        """Two-phase commit: leave the open transaction, once `flush`ed, to another producer
        instance that ends it with `resume_transaction(producer_id, producer_epoch)` (read
        both before calling this). This producer is then uninitialized again and may be
        reused: its next `init_transactions` fences the handed-over epoch like a new
        producer's would (and aborts the transaction if it was not ended yet).
        `IllegalStateError` when a record or request is still pending."""
        txn = self._txn_manager("hand_over_transaction")
        if self.accumulator.incomplete():
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id}: cannot hand the transaction over "
                "with records not yet delivered; flush first"
            )
        txn.hand_over_transaction()

    def begin_transaction(self) -> None:
        """Start a transaction (no request: partitions join it as records go to them)."""
        self._txn_manager("begin_transaction").begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: Offsets,
        group_metadata: ConsumerGroupMetadata | str,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets as part of the transaction (KIP-98, KIP-447).

        `offsets`: a mapping `TopicPartition -> offset | OffsetAndMetadata`, or items with
        `topic`, `partition` and `offset` (confluent-kafka's TopicPartition), or
        `(topic, partition, offset)` tuples; each offset is the next record to consume.
        `group_metadata`: `Consumer.consumer_group_metadata()` (or a group id)."""
        txn = self._txn_manager("send_offsets_to_transaction")
        self._await(txn.send_offsets(normalize_offsets(offsets), _group(group_metadata)), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush every record, then commit. After `KafkaTimeoutError`, call it again."""
        self._await(self._txn_manager("commit_transaction").begin_commit(), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not yet sent, wait for those in flight, then abort."""
        self._await(self._txn_manager("abort_transaction").begin_abort(), timeout)

    # ------------------------------------------------------------------ flush and close

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each record is delivered or failed.

        Raises `KafkaTimeoutError` if records are still pending after `timeout` seconds.
        Delivery failures are reported through each record's future, not here."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self.accumulator.begin_flush()
        try:
            self._io.wakeup()
            for batch in self.accumulator.incomplete():
                remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
                if not batch.result.wait(remaining):
                    pending = sum(b.record_count for b in self.accumulator.incomplete())
                    raise KafkaTimeoutError(
                        f"Failed to flush accumulated records within {timeout} s; "
                        f"{pending} record(s) still pending"
                    )
        finally:
            self.accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Stop accepting records, deliver what is queued for up to `timeout` seconds (no
        limit when None), then fail whatever is left and stop the I/O thread."""
        if self._closed:
            return
        self._closed = True
        self.accumulator.close()
        if timeout is None or timeout > 0:
            self._io.call_soon(self._sender.stop, False)
            if self._io.join(timeout):
                return
            log.warning("producer close timed out after %s s; failing pending records", timeout)
        self._io.call_soon(self._sender.stop, True)
        self._io.join(30)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ state

    @property
    def producer_id(self) -> int:
        """The idempotent producer id (-1 before InitProducerId or without idempotence)."""
        return self.txn.producer_id if self.txn is not None else -1

    @property
    def producer_epoch(self) -> int:
        return self.txn.producer_epoch if self.txn is not None else -1


def _group(group_metadata: object) -> ConsumerGroupMetadata:
    if isinstance(group_metadata, ConsumerGroupMetadata):
        return group_metadata
    if isinstance(group_metadata, str):
        return ConsumerGroupMetadata(group_metadata)
    raise TypeError(
        "group_metadata must be Consumer.consumer_group_metadata() or a group id, "
        f"not {type(group_metadata).__name__}"
    )
