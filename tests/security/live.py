"""An in-process broker for security tests, and a raw Kafka client over asyncio streams (plain
or TLS) that sends one request at a time and decodes the answer."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import AsyncIterator
from typing import Any

from onceflow.broker.config import BrokerConfig
from onceflow.broker.connection import ClientConnection
from onceflow.broker.server import Broker
from onceflow.protocol import messages
from onceflow.protocol.headers import RequestHeader, encode_request_frame

PEER_TIMEOUT_S = 10.0


@contextlib.asynccontextmanager
async def running_broker(data_dir, **config: Any) -> AsyncIterator[Broker]:
    """A started `Broker` on `data_dir`; `config` holds dotted keys (any value, as text)."""
    values = {"log.dirs": str(data_dir), "listeners": "PLAINTEXT://127.0.0.1:0"}
    values.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in config.items()})
    broker = Broker(BrokerConfig(values))
    try:
        await broker.start()
        yield broker
    finally:
        await broker.stop()


def client_tls(pki, certificate: str | None = None, **options: Any) -> ssl.SSLContext:
    """A client context trusting the test CA, with `<certificate>.crt/.key` when given."""
    context = ssl.create_default_context(cafile=pki.ca)
    if certificate is not None:
        context.load_cert_chain(pki.path(f"{certificate}.crt"), pki.path(f"{certificate}.key"))
    for name, value in options.items():
        setattr(context, name, value)
    return context


class RawClient:
    """One connection; `request(api_key, version, request)` returns the decoded response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self._correlation_id = 0

    @classmethod
    async def connect(cls, address, tls: ssl.SSLContext | None = None) -> RawClient:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                address.host, address.port, ssl=tls, server_hostname="localhost" if tls else None
            ),
            PEER_TIMEOUT_S,
        )
        return cls(reader, writer)

    async def send(self, api_key: int, version: int, request: Any) -> int:
        self._correlation_id += 1
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self._correlation_id,
            client_id="security-test",
        )
        self.writer.write(encode_request_frame(header, request))
        await self.writer.drain()
        return self._correlation_id

    async def receive(self, api_key: int, version: int) -> Any:
        size = struct.unpack(">i", await self._read(4))[0]
        body = await self._read(size)
        response_cls = messages.RESPONSES[api_key]
        offset = 4  # correlation id
        if response_cls.FLEXIBLE_MIN is not None and version >= response_cls.FLEXIBLE_MIN:
            if api_key != 18:  # ApiVersions answers with header v0
                offset += 1  # empty tagged fields
        return response_cls.decode(memoryview(body)[offset:], version)

    async def _read(self, n: int) -> bytes:
        return await asyncio.wait_for(self.reader.readexactly(n), PEER_TIMEOUT_S)

    async def request(self, api_key: int, version: int, request: Any) -> Any:
        await self.send(api_key, version, request)
        return await self.receive(api_key, version)

    async def closed_by_peer(self) -> bool:
        """True when the broker closes the connection (EOF or reset) within the timeout."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), PEER_TIMEOUT_S)
        except (ConnectionError, ssl.SSLError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


def connections_of(broker: Broker, listener_name: str) -> list[ClientConnection]:
    return [
        c for c in broker._connections if c.listener_name == listener_name and c.ctx is not None
    ]
