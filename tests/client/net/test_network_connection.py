"""AsyncBrokerConnection, the asyncio transport around the protocol core, against the scripted
in-process broker (`tests/support/fake_broker.py`): the handshake (KIP-511 retry, a broker
that closes or stays silent), a pipelined round trip, and a response that breaks the
conversation."""

from __future__ import annotations

import asyncio

import pytest
from support.fake_broker import FakeBroker

from onceflow.client.errors import BrokerResponseError, KafkaConnectionError
from onceflow.client.net.network import AsyncBrokerConnection
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages import REQUESTS

OLD_BROKER = {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 9)}


@pytest.fixture
def serve():
    """Start a fake broker with OLD_BROKER's versions and `behaviour`; its port."""
    brokers: list[FakeBroker] = []

    async def start(behaviour: str) -> int:
        brokers.append(FakeBroker(OLD_BROKER, behaviour=behaviour))
        return brokers[-1].port

    yield start
    for broker in brokers:
        broker.stop()


def test_handshake_falls_back_and_requests_round_trip(serve):
    async def scenario():
        port = await serve("normal")
        conn = await AsyncBrokerConnection(1, "127.0.0.1", port, "me").connect(5.0)
        assert conn.ready and conn.broker_versions[ApiKey.METADATA] == (0, 9)
        assert conn.api_version(ApiKey.METADATA) == 9 and conn.supports(ApiKey.METADATA)
        metadata = REQUESTS[ApiKey.METADATA](topics=[])
        first, second = conn.send(metadata), conn.send(metadata, 5)
        assert conn.in_flight == 2
        assert [(await f).cluster_id for f in (first, second)] == ["fake", "fake"]
        conn.close()
        assert conn.closed and not conn.ready

    asyncio.run(scenario())


def test_a_broker_closing_during_the_handshake_fails_connect(serve):
    async def scenario():
        conn = AsyncBrokerConnection(1, "127.0.0.1", await serve("close-at-once"), "me")
        with pytest.raises(KafkaConnectionError, match="lost"):
            await conn.connect(5.0)
        assert conn.closed

    asyncio.run(scenario())


def test_a_silent_broker_times_the_handshake_out_and_the_connection_is_closed(serve):
    async def scenario():
        conn = AsyncBrokerConnection(1, "127.0.0.1", await serve("silent-at-once"), "me")
        with pytest.raises(TimeoutError):
            await conn.connect(0.2)
        assert conn.closed and conn.in_flight == 0

    asyncio.run(scenario())


def test_a_correlation_id_out_of_order_fails_everything_in_flight(serve):
    async def scenario():
        conn = AsyncBrokerConnection(1, "127.0.0.1", await serve("wrong-correlation"), "me")
        await conn.connect(5.0)
        metadata = REQUESTS[ApiKey.METADATA](topics=[])
        futures = [conn.send(metadata), conn.send(metadata)]
        for future in futures:
            with pytest.raises(BrokerResponseError, match="unexpected correlation id"):
                await future
        assert conn.closed
        with pytest.raises(BrokerResponseError):  # later sends see why it closed
            await conn.send(metadata)

    asyncio.run(scenario())
