"""What the broker's metric modules share: the state a scrape reads and a partition's labels
(the text format itself is `onceflow.prometheus`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from onceflow.prometheus import escape

if TYPE_CHECKING:
    from onceflow.broker.transactions import BrokerTransactions
    from onceflow.coordinator.group.coordinator import GroupCoordinator
    from onceflow.coordinator.producer_id import ProducerIdManager
    from onceflow.log.manager import LogManager


class ScrapedState(Protocol):
    """What a scrape reads (the broker's `BrokerState`; the metric modules do not import it)."""

    logs: LogManager
    producer_ids: ProducerIdManager
    transactions: BrokerTransactions
    group_coordinator: GroupCoordinator


def partition_labels(topic: str, partition: int) -> str:
    """The `topic="...",partition="..."` labels of a partition's series."""
    return f'topic="{escape(topic)}",partition="{partition}"'
