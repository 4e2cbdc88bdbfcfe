"""onceflow's Kafka client: `Producer` (idempotent by default, transactional with
`transactional.id`), `Consumer` (manual assignment or consumer groups), `AdminClient`;
synchronous APIs over one background I/O thread per client."""

from onceflow.client.consumer.completed_fetch import ConsumerRecord
from onceflow.client.consumer.consumer import Consumer
from onceflow.client.errors import (
    CommitFailedError,
    ConfigException,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
    UnknownTopicOrPartitionError,
)
from onceflow.client.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from onceflow.client.producer.futures import FutureRecordMetadata, RecordMetadata
from onceflow.client.producer.producer import Producer
from onceflow.common import TopicPartition

__all__ = [
    "CommitFailedError",
    "ConfigException",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "OffsetAndMetadata",
    "OutOfOrderSequenceError",
    "Producer",
    "ProducerFencedError",
    "RecordMetadata",
    "TopicPartition",
    "TransactionAbortableError",
    "TransactionAbortedError",
    "UnknownTopicOrPartitionError",
]
