"""The consumer: `Consumer` (`consumer`), the fetcher and its completed fetches, the
subscription, and consumer groups (`group`).

`onceflow.client.consumer.Consumer` is the documented path of the consumer."""

from onceflow.client.consumer.completed_fetch import ConsumerRecord, FetchedColumns
from onceflow.client.consumer.consumer import Consumer

__all__ = ["Consumer", "ConsumerRecord", "FetchedColumns"]
