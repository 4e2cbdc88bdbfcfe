"""AsyncBrokerConnection, the asyncio transport around the protocol core, against a scripted
in-process broker: the handshake (KIP-511 retry, a broker that closes or stays silent), a
pipelined round trip, and a response that breaks the conversation."""

from __future__ import annotations

import asyncio
import struct

import pytest

from onceflow.client.errors import BrokerResponseError, KafkaConnectionError
from onceflow.client.net.network import AsyncBrokerConnection
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import encode_response_header, parse_request_header
from onceflow.protocol.messages import REQUESTS, RESPONSES

OLD_BROKER = {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 9)}


async def _frames(reader: asyncio.StreamReader):
    """(api key, version, correlation id) of each request the client sends."""
    while True:
        try:
            size_bytes = await reader.readexactly(4)
        except asyncio.IncompleteReadError:
            return
        frame = await reader.readexactly(struct.unpack(">i", size_bytes)[0])
        header, _ = parse_request_header(frame)
        yield header.request_api_key, header.request_api_version, header.correlation_id


def _answer(key: int, version: int, correlation_id: int) -> bytes:
    cls = RESPONSES[key]
    flexible = False
    if key == ApiKey.API_VERSIONS:
        entries = [
            cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in OLD_BROKER.items()
        ]
        if version > OLD_BROKER[ApiKey.API_VERSIONS][1]:  # KIP-511: refusal in a v0 body
            body = cls(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=entries).encode(0)
        else:
            body = cls(error_code=0, api_keys=entries).encode(version)
    else:
        body = cls(brokers=[], cluster_id="fake", controller_id=1, topics=[]).encode(version)
        flexible = cls.is_flexible(version)
    payload = encode_response_header(correlation_id, flexible) + body
    return struct.pack(">i", len(payload)) + payload


@pytest.fixture
def serve():
    servers = []

    async def start(behaviour: str) -> int:
        async def handle(reader, writer):
            if behaviour == "close":
                writer.close()
                return
            async for key, version, correlation_id in _frames(reader):
                if behaviour == "silent":
                    continue
                if behaviour == "wrong-correlation" and key != ApiKey.API_VERSIONS:
                    correlation_id += 1
                writer.write(_answer(key, version, correlation_id))

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return server.sockets[0].getsockname()[1]

    yield start
    for server in servers:
        server.close()


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
        conn = AsyncBrokerConnection(1, "127.0.0.1", await serve("close"), "me")
        with pytest.raises(KafkaConnectionError, match="lost"):
            await conn.connect(5.0)
        assert conn.closed

    asyncio.run(scenario())


def test_a_silent_broker_times_the_handshake_out_and_the_connection_is_closed(serve):
    async def scenario():
        conn = AsyncBrokerConnection(1, "127.0.0.1", await serve("silent"), "me")
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
