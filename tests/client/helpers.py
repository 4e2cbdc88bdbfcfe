"""Helpers for client tests against a live broker (imported as `client.helpers`)."""

from __future__ import annotations

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.connection import connect_bootstrap
from onceflow.protocol.api_keys import ApiKey


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].raise_for_error()


def broker_supports(bootstrap: str, api_key: ApiKey) -> bool:
    """Whether the broker's ApiVersions advertises `api_key`."""
    conn = connect_bootstrap(bootstrap)
    try:
        return int(api_key) in conn.broker_versions
    finally:
        conn.close()
