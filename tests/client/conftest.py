"""Fixtures for client tests."""

from __future__ import annotations

import pytest
from client.helpers import broker_supports

from onceflow.protocol.api_keys import ApiKey


@pytest.fixture
def idempotent_broker(broker):
    """The broker, skipping the test unless it advertises InitProducerId (key 22)."""
    if not broker_supports(broker.bootstrap, ApiKey.INIT_PRODUCER_ID):
        pytest.skip("broker's ApiVersions does not advertise InitProducerId (key 22)")
    return broker
