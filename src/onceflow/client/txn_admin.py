"""Transaction listings for `AdminClient`: ListTransactions (KIP-664) on every broker.

Kafka's `Admin.listTransactions`: each broker answers for the transactional ids its
coordinator partitions hold, so the request goes to every broker Metadata names. A broker
older than Kafka 3.0 does not know the API: `UnsupportedVersionError` (from the connection).
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.client.admin_connections import AdminConnections
from onceflow.client.errors import raise_for_error
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages import REQUESTS

__all__ = ["TransactionListing", "list_transactions"]


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id as its coordinator lists it (`state`: Kafka's state name)."""

    transactional_id: str
    producer_id: int
    state: str


def list_transactions(net: AdminConnections) -> list[TransactionListing]:
    """Every transactional id on every broker, sorted by id."""
    cls = REQUESTS[ApiKey.LIST_TRANSACTIONS]
    out: dict[str, TransactionListing] = {}
    for node in net.metadata([])[0]:
        response = net.to_node(node).send(cls(state_filters=[], producer_id_filters=[]))
        if response.error_code != ErrorCode.NONE:
            raise_for_error(response.error_code, "ListTransactions")
        for t in response.transaction_states:
            out[t.transactional_id] = TransactionListing(
                t.transactional_id, t.producer_id, t.transaction_state
            )
    return [out[t] for t in sorted(out)]
