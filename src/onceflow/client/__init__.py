"""onceflow's Kafka client: `Producer` (idempotent by default), `Consumer` (manual assignment),
`AdminClient`; synchronous APIs over one background I/O thread per client."""

from onceflow.client.completed_fetch import ConsumerRecord
from onceflow.client.consumer import Consumer
from onceflow.client.errors import (
    ConfigException,
    KafkaError,
    KafkaTimeoutError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    UnknownTopicOrPartitionError,
)
from onceflow.client.futures import FutureRecordMetadata, RecordMetadata
from onceflow.client.metadata import TopicPartition
from onceflow.client.producer import Producer

__all__ = [
    "ConfigException",
    "Consumer",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "KafkaError",
    "KafkaTimeoutError",
    "OutOfOrderSequenceError",
    "Producer",
    "ProducerFencedError",
    "RecordMetadata",
    "TopicPartition",
    "UnknownTopicOrPartitionError",
]
