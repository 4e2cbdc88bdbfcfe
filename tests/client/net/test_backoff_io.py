"""Exponential retry and reconnect backoff (KIP-580, KIP-144) through the client's real I/O
paths, against the scripted broker (tests/support/fake_broker.py): reconnects to a node that
keeps refusing, a group coordinator that stays unavailable, join rounds the coordinator keeps
refusing, a synchronous commit that keeps failing, a partition whose produce keeps failing,
InitProducerId that keeps failing, a node whose Fetch keeps failing.

No test asserts a timing. The reconnect test reads the waits the client computed; the others
count the requests that reach the broker during a window: with retry.backoff.ms=10 and
retry.backoff.max.ms=1000 the waits are at least 8, 16, 32, ... 800 ms (jitter -20%), so a
2-second window holds at most 9 attempts however fast the machine; a constant 10 ms backoff
would send well over a hundred. A slow machine only lowers the count."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from support.fake_broker import FakeBroker

from client.fake_broker import ProducerFakeBroker
from onceflow.client.consumer import Consumer
from onceflow.client.consumer.config import consumer_config
from onceflow.client.errors import KafkaTimeoutError
from onceflow.client.net.metadata import Metadata
from onceflow.client.net.network import NetworkClient
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages import RESPONSES

WINDOW_S = 2.0
MOST_ATTEMPTS = 12  # exponential: at most 9 in the window (see above); constant: > 100
BACKOFF = {"retry.backoff.ms": 10, "retry.backoff.max.ms": 1000}
GROUP = {"group.id": "g"}
CONSUMER_VERSIONS = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (0, 12),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.FETCH: (4, 12),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.OFFSET_COMMIT: (0, 8),
}


def _count(broker: FakeBroker, key: int) -> int:
    with broker.lock:
        return sum(1 for seen in broker.seen if seen[0] == key)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------- reconnect (KIP-144)


class _Recorder:
    """Wraps the client's reconnect backoff, recording (attempts, wait ms) of each failure."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple[int, float]] = []

    def backoff_s(self, attempts: int) -> float:
        wait = self.inner.backoff_s(attempts)
        self.calls.append((attempts, wait * 1000))
        return wait


def test_reconnects_back_off_exponentially_and_reset_once_connected():
    port = _free_port()
    config = consumer_config(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 160,
        }
    )

    async def scenario() -> tuple[list, list]:
        network = NetworkClient(config, Metadata(300_000, 100))
        recorder = _Recorder(network.reconnect_backoff.backoff)
        network.reconnect_backoff.backoff = recorder

        async def attempt() -> object:
            # wait out the backoff as an I/O loop would, then try the node again
            while (delay := network.time_to_reconnect(time.monotonic())) is not None:
                await asyncio.sleep(delay)
            assert network.connection(-1) is None  # starts the attempt
            return await network.await_connection(-1)

        for _ in range(6):
            assert await attempt() is None  # nothing listens: refused
        refused = list(recorder.calls)
        with FakeBroker(CONSUMER_VERSIONS, port=port):
            conn = await attempt()
            assert conn is not None and conn.ready
            assert network.reconnect_backoff.failures(-1) == 0
            conn.close()
        assert await attempt() is None  # refused again: the count starts over
        network.close()
        return refused, recorder.calls[len(refused) :]

    refused, after = asyncio.run(scenario())
    assert [attempts for attempts, _ in refused] == [0, 1, 2, 3, 4, 5]
    for attempts, wait in refused:
        base = min(20 * 2**attempts, 160)
        assert 0.8 * base - 1e-6 <= wait <= min(1.2 * base, 160) + 1e-6, refused
    assert refused[3][1] > refused[0][1] * 3  # grows: 160 vs 20 (jitter at most 1.5x apart)
    assert [attempts for attempts, _ in after] == [0]


# ---------------------------------------------------------------- group coordinator lookup


def _coordinator_not_available(broker, version, request):
    cls = RESPONSES[ApiKey.FIND_COORDINATOR]
    code = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if version >= 4:
        keys = request.coordinator_keys
        return cls(coordinators=[cls.Coordinator(key=k, node_id=-1, error_code=code) for k in keys])
    return cls(error_code=code, node_id=-1)


def _coordinator_is_self(broker, version, request):
    cls = RESPONSES[ApiKey.FIND_COORDINATOR]
    me = {"node_id": 1, "host": "127.0.0.1", "port": broker.port}
    if version >= 4:
        return cls(coordinators=[cls.Coordinator(key=k, **me) for k in request.coordinator_keys])
    return cls(**me)


def _rebalance_in_progress(broker, version, request):
    code = int(ErrorCode.REBALANCE_IN_PROGRESS)
    return RESPONSES[ApiKey.JOIN_GROUP](error_code=code, member_id=request.member_id)


def _commit_load_in_progress(broker, version, request):
    cls = RESPONSES[ApiKey.OFFSET_COMMIT]
    code = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    partition = cls.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    return cls(
        topics=[
            cls.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    partition(partition_index=p.partition_index, error_code=code)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
    )


def _poll_for(consumer: Consumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert consumer.poll(0.1) == []


def _subscribe_and_poll(consumer: Consumer) -> None:
    consumer.subscribe(["t"])
    _poll_for(consumer, WINDOW_S)


def _consumer_requests(handlers, key: int, act, **config) -> int:
    """Run `act(consumer)` against a scripted broker; how many `key` requests reached it."""
    with FakeBroker(CONSUMER_VERSIONS, {"t": 1}, handlers) as broker:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, **BACKOFF, **config})
        try:
            act(consumer)
            return _count(broker, key)
        finally:
            consumer.close(0.5)


def _commit_until_timeout(consumer: Consumer) -> None:
    with pytest.raises(KafkaTimeoutError):
        consumer.commit({TopicPartition("t", 0): 5}, timeout=WINDOW_S)


FIND, JOIN, COMMIT = ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.OFFSET_COMMIT
GROUP_CASES = {  # what keeps failing: (scripted answers, the request counted, what the app does)
    "coordinator-lookup": ({FIND: _coordinator_not_available}, FIND, _subscribe_and_poll),
    "join-round": (
        {FIND: _coordinator_is_self, JOIN: _rebalance_in_progress},
        JOIN,
        _subscribe_and_poll,
    ),
    "sync-commit": (
        {FIND: _coordinator_is_self, COMMIT: _commit_load_in_progress},
        COMMIT,
        _commit_until_timeout,
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(GROUP_CASES))
def test_group_requests_that_keep_failing_back_off_exponentially(case):
    handlers, key, act = GROUP_CASES[case]
    requests = _consumer_requests(handlers, key, act, **GROUP)
    assert 3 <= requests <= MOST_ATTEMPTS, requests


# ---------------------------------------------------------------- producer batch retries


@pytest.mark.timeout(60)
def test_a_batch_that_keeps_failing_is_retried_with_growing_waits():
    fake = ProducerFakeBroker({"t": 1})
    try:
        fake.inject[("t", 0)] = [int(ErrorCode.NOT_ENOUGH_REPLICAS)] * 1000
        with Producer({"bootstrap.servers": fake.bootstrap, "linger.ms": 0, **BACKOFF}) as p:
            future = p.send("t", b"v", partition=0)
            time.sleep(WINDOW_S)
            with fake.lock:
                attempts = fake.attempts[("t", 0)]
                fake.inject[("t", 0)].clear()
            assert future.result(30).offset == 0  # the retries go on, and one succeeds
    finally:
        fake.stop()
    assert 3 <= attempts <= MOST_ATTEMPTS, attempts


def _init_load_in_progress(broker, version, request):
    with broker.lock:
        broker.init_requests.append((version, request.producer_id, request.producer_epoch))
    code = int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return RESPONSES[ApiKey.INIT_PRODUCER_ID](error_code=code, producer_id=-1, producer_epoch=-1)


@pytest.mark.timeout(60)
def test_init_producer_id_that_keeps_failing_is_retried_with_growing_waits():
    fake = ProducerFakeBroker({"t": 1})
    answer_normally = fake.handlers[ApiKey.INIT_PRODUCER_ID]
    fake.handlers[ApiKey.INIT_PRODUCER_ID] = _init_load_in_progress
    try:
        with Producer({"bootstrap.servers": fake.bootstrap, "linger.ms": 0, **BACKOFF}) as p:
            future = p.send("t", b"v", partition=0)
            time.sleep(WINDOW_S)
            with fake.lock:
                attempts = len(fake.init_requests)
            fake.handlers[ApiKey.INIT_PRODUCER_ID] = answer_normally
            assert future.result(30).offset == 0
    finally:
        fake.stop()
    assert 3 <= attempts <= MOST_ATTEMPTS, attempts


# ---------------------------------------------------------------- fetch per node


def _fetch_fails(broker, version, request):
    return RESPONSES[ApiKey.FETCH](error_code=int(ErrorCode.UNKNOWN_SERVER_ERROR), responses=[])


@pytest.mark.timeout(60)
def test_a_node_whose_fetch_keeps_failing_is_fetched_with_growing_waits():
    def fetch(consumer: Consumer) -> None:
        tp = TopicPartition("t", 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        _poll_for(consumer, WINDOW_S)

    fetches = _consumer_requests({ApiKey.FETCH: _fetch_fails}, ApiKey.FETCH, fetch)
    assert 3 <= fetches <= MOST_ATTEMPTS, fetches
