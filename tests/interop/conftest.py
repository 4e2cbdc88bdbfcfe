"""Fixtures of the interop tests: `node`, one onceflow broker (node) shared by a module of
Kafka-tool tests (support.kafka_tools), with quick group settings and the admin route for
aborting hanging transactions (`onceflow.admin.allow.write.txn.markers`); `group_broker`, a
broker of its own per test with quick group settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.broker import BrokerProcess
from support.peers import FAST_GROUP_BROKER, GROUP_BROKER_CONFIG


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    config = {**FAST_GROUP_BROKER, "onceflow.admin.allow.write.txn.markers": True}
    process = BrokerProcess(tmp_path_factory.mktemp("tools") / "data", config)
    yield process
    process.stop()


@pytest.fixture
def group_broker(broker_factory) -> BrokerProcess:
    """A broker with quick group settings (`GROUP_BROKER_CONFIG`), stopped after the test."""
    return broker_factory(GROUP_BROKER_CONFIG)
