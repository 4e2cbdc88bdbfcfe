"""What the broker's metric modules share: the state a scrape reads and the Prometheus text
exposition (format 0.0.4) helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

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


def header(out: list[str], name: str, kind: str, text: str) -> None:
    """Append the HELP and TYPE lines of metric `name`."""
    out.append(f"# HELP {name} {text}")
    out.append(f"# TYPE {name} {kind}")


def escape(value: str) -> str:
    """A label value escaped as the text format requires."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def partition_labels(topic: str, partition: int) -> str:
    """The `topic="...",partition="..."` labels of a partition's series."""
    return f'topic="{escape(topic)}",partition="{partition}"'
