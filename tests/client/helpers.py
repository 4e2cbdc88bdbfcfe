"""Helpers for client tests against a live broker (imported as `client.helpers`)."""

from __future__ import annotations

from onceflow.client.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 3) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].raise_for_error()
