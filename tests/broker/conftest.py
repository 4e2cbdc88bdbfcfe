"""Fixtures for the broker's in-process handler tests."""

from __future__ import annotations

import asyncio

import pytest

from broker.broker_helpers import open_state


@pytest.fixture
def state(tmp_path):
    """A BrokerState on a fresh data directory (fsync on, as in production)."""
    broker_state = open_state(tmp_path / "data")
    yield broker_state
    asyncio.run(broker_state.close())


@pytest.fixture
def state_factory(tmp_path):
    """`state_factory(**overrides)` -> BrokerState; all are closed at the end."""
    opened = []

    def factory(name: str = "data", **overrides):
        broker_state = open_state(tmp_path / name, **overrides)
        opened.append(broker_state)
        return broker_state

    yield factory
    for broker_state in opened:
        asyncio.run(broker_state.close())
