"""A fault-injecting TCP proxy that understands Kafka framing, for fault tests.

The proxy listens on a port chosen at runtime and relays every client connection to one upstream
broker over its own upstream connection. It reads requests frame by frame (4-byte size, then the
request header: api_key, api_version, correlation_id) and responses frame by frame (4-byte size,
then correlation_id), so it can count requests by API and inject faults at request boundaries.

Fault modes:

- pass-through (the default);
- *cut after forwarding*: the chosen request is forwarded to the broker, the proxy waits for the
  broker's response (so the request has taken effect) and then closes the client connection
  without relaying it. The client never learns the outcome — the classic way a retrying
  producer writes a record twice. A request is chosen either as the Nth request of an API key
  (counted over all connections) or with probability p from a seeded RNG.

Run it with the broker's advertised listener pointing at the proxy, so that Metadata responses
name the proxy and clients reach the broker only through it. The proxy can be started before its
upstream is known (`set_upstream`), which is what that set-up needs.

The proxy runs an asyncio loop in its own daemon thread; `stop()` closes everything.
"""

from __future__ import annotations

import asyncio
import collections
import random
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

# how long a cut request waits for the broker's response before the client is cut anyway
# (acks=0 produce requests have no response)
CUT_RESPONSE_WAIT_S = 10.0

_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")
_CORRELATION_ID = struct.Struct(">i")


@dataclass
class ProxyStats:
    """Counters, by api key: requests seen from clients, requests cut, connections accepted;
    and the versions seen of each api key."""

    requests_seen: collections.Counter[int] = field(default_factory=collections.Counter)
    versions_seen: dict[int, set[int]] = field(default_factory=dict)
    requests_cut: collections.Counter[int] = field(default_factory=collections.Counter)
    connections: int = 0


@dataclass
class _CutRule:
    api_keys: frozenset[int] | None  # None: any api key
    nth: int | None = None  # cut the nth matching request (1-based) once
    probability: float = 0.0
    rng: random.Random | None = None


class KafkaProxy:
    """A stoppable Kafka-aware TCP proxy on 127.0.0.1 with request-level fault injection."""

    def __init__(self, upstream_host: str | None = None, upstream_port: int | None = None):
        self._upstream: tuple[str, int] | None = None
        if upstream_host is not None and upstream_port is not None:
            self._upstream = (upstream_host, upstream_port)
        self._lock = threading.Lock()
        self._rule: _CutRule | None = None
        self._matching_seen = 0
        self.stats = ProxyStats()
        self.host = "127.0.0.1"
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    # ------------------------------------------------------------------ control (any thread)

    @property
    def address(self) -> str:
        """`host:port` of the proxy's listener, for `bootstrap.servers` and advertised listeners."""
        return f"{self.host}:{self.port}"

    def set_upstream(self, host: str, port: int) -> None:
        """Point new client connections at the broker at host:port."""
        with self._lock:
            self._upstream = (host, port)

    def pass_through(self) -> None:
        """Stop injecting faults."""
        with self._lock:
            self._rule = None

    def cut_nth(self, api_key: int, nth: int) -> None:
        """Cut after forwarding the nth request (1-based, from now on) with this api key, once."""
        if nth < 1:
            raise ValueError("nth counts from 1")
        with self._lock:
            self._rule = _CutRule(api_keys=frozenset({int(api_key)}), nth=nth)
            self._matching_seen = 0

    def cut_randomly(
        self, probability: float, seed: int, api_keys: Iterable[int] | None = None
    ) -> None:
        """Cut after forwarding each matching request with this probability (seeded RNG)."""
        if not 0.0 <= probability <= 1.0:
            raise ValueError("probability must be within [0, 1]")
        keys = None if api_keys is None else frozenset(int(k) for k in api_keys)
        with self._lock:
            self._rule = _CutRule(api_keys=keys, probability=probability, rng=random.Random(seed))
            self._matching_seen = 0

    def counts(self) -> tuple[dict[int, int], dict[int, int]]:
        """A consistent snapshot of (requests seen, requests cut) by api key."""
        with self._lock:
            return dict(self.stats.requests_seen), dict(self.stats.requests_cut)

    def start(self) -> KafkaProxy:
        """Start listening on a free port in a background thread; returns self."""
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._serve_client, self.host, 0)
                )
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # reported to the caller of start()
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        self._thread = threading.Thread(target=run, name="kafka-proxy", daemon=True)
        self._thread.start()
        started.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Close the listener and every relayed connection, and end the thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
        try:
            fut.result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            self._loop = None
            self._thread = None

    def __enter__(self) -> KafkaProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ the relay (loop thread)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def versions(self, api_key: int) -> set[int]:
        """The versions of `api_key` that clients have sent so far."""
        with self._lock:
            return set(self.stats.versions_seen.get(api_key, ()))

    def _decide_cut(self, api_key: int, api_version: int) -> bool:
        """Count a request and decide whether to cut after forwarding it."""
        with self._lock:
            self.stats.requests_seen[api_key] += 1
            self.stats.versions_seen.setdefault(api_key, set()).add(api_version)
            rule = self._rule
            if rule is None or (rule.api_keys is not None and api_key not in rule.api_keys):
                return False
            self._matching_seen += 1
            if rule.nth is not None:
                cut = self._matching_seen == rule.nth
                if cut:
                    self._rule = None
            else:
                cut = rule.rng is not None and rule.rng.random() < rule.probability
            if cut:
                self.stats.requests_cut[api_key] += 1
            return cut

    async def _serve_client(
        self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        with self._lock:
            self.stats.connections += 1
            upstream = self._upstream
        self._writers.add(client_writer)
        if upstream is None:
            client_writer.close()
            self._writers.discard(client_writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*upstream)
        except OSError:
            client_writer.close()
            self._writers.discard(client_writer)
            return
        self._writers.add(up_writer)
        cut_correlation: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        requests = asyncio.create_task(
            self._relay_requests(client_reader, up_writer, cut_correlation)
        )
        responses = asyncio.create_task(
            self._relay_responses(up_reader, client_writer, cut_correlation)
        )
        try:
            await asyncio.wait({requests, responses}, return_when=asyncio.FIRST_COMPLETED)
            if requests.done() and cut_correlation.done():
                # a cut request was forwarded: wait for its response (or give up), then cut
                await asyncio.wait({responses}, timeout=CUT_RESPONSE_WAIT_S)
        finally:
            for task in (requests, responses):
                task.cancel()
            await asyncio.gather(requests, responses, return_exceptions=True)
            for writer in (client_writer, up_writer):
                writer.close()
                self._writers.discard(writer)

    async def _relay_requests(
        self,
        client_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
        cut_correlation: asyncio.Future[int],
    ) -> None:
        """Client -> broker, frame by frame; stops after forwarding a request chosen to be cut."""
        while True:
            try:
                size_bytes = await client_reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                if size < _REQUEST_HEADER.size:
                    # not a Kafka request: relay what we have and stop understanding the stream
                    up_writer.write(size_bytes)
                    await up_writer.drain()
                    return
                body = await client_reader.readexactly(size)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            api_key, api_version, correlation_id = _REQUEST_HEADER.unpack_from(body)
            cut = self._decide_cut(api_key, api_version)
            up_writer.write(size_bytes + body)
            await up_writer.drain()
            if cut:
                cut_correlation.set_result(correlation_id)
                return

    async def _relay_responses(
        self,
        up_reader: asyncio.StreamReader,
        client_writer: asyncio.StreamWriter,
        cut_correlation: asyncio.Future[int],
    ) -> None:
        """Broker -> client, frame by frame; returns without relaying the cut request's response."""
        while True:
            try:
                size_bytes = await up_reader.readexactly(4)
                (size,) = _SIZE.unpack(size_bytes)
                body = await up_reader.readexactly(max(size, 0))
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if size >= 4 and cut_correlation.done():
                (correlation_id,) = _CORRELATION_ID.unpack_from(body)
                if correlation_id == cut_correlation.result():
                    return
            try:
                client_writer.write(size_bytes + body)
                await client_writer.drain()
            except ConnectionError:
                return
