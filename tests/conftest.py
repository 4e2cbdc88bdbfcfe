"""Fixtures shared by all tests: `broker` (a fresh broker process), `broker_factory`,
`proxied` (a broker behind the fault-injecting proxy), `pki` (test certificates), `peer` (the
same test on onceflow's broker and on Apache Kafka with transaction version 2 and 1),
`kafka_clusters` (Apache Kafka clusters shared by the session) and `secure_broker` (TLS and
SASL listeners, shared by a module)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support.broker import BrokerProcess  # noqa: E402
from support.kafka_cluster import KafkaUnavailable, kafka_libs  # noqa: E402
from support.peers import (  # noqa: E402
    FAST_GROUP_BROKER,
    KINDS,
    ONCEFLOW,
    TRANSACTION_VERSION,
    KafkaClusters,
    Peer,
)
from support.pki import OPENSSL, Pki, make_pki  # noqa: E402
from support.proxy import KafkaProxy  # noqa: E402
from support.secure_broker import start_secure_broker  # noqa: E402


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers on demand: `broker_factory(extra_config=..., name=...)`; all are stopped
    at the end of the test. Each gets its own data directory under `tmp_path`."""
    started: list[BrokerProcess] = []

    def factory(
        extra_config: dict[str, object] | None = None,
        advertised_listener: str | None = None,
        name: str | None = None,
        data_dir: Path | None = None,
    ) -> BrokerProcess:
        directory = data_dir or tmp_path / (name or f"broker{len(started)}") / "data"
        process = BrokerProcess(directory, extra_config, advertised_listener)
        started.append(process)
        return process

    yield factory
    for process in started:
        process.stop()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A broker process on a fresh data directory, stopped after the test."""
    return broker_factory()


@pytest.fixture
def proxied(
    broker_factory: Callable[..., BrokerProcess],
) -> Iterator[tuple[KafkaProxy, BrokerProcess]]:
    """(proxy, broker) with the broker advertising the proxy's address, so clients that
    bootstrap through the proxy send every request through it."""
    with KafkaProxy() as proxy:
        broker = broker_factory(advertised_listener=proxy.address)
        proxy.set_upstream(broker.host, broker.port)
        yield proxy, broker


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Test certificates (a CA, server and client certificates), made once per session."""
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def kafka_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaClusters]:
    """Apache Kafka clusters for the session: `kafka_clusters.get(nodes, transaction_version)`
    starts one on first use. Fails (never skips) when Kafka's jars were not fetched."""
    try:
        kafka_libs()
    except KafkaUnavailable as exc:
        pytest.fail(str(exc))
    clusters = KafkaClusters(tmp_path_factory.mktemp("kafka"))
    yield clusters
    clusters.stop()


@pytest.fixture(
    params=[
        pytest.param(kind, marks=[] if kind == ONCEFLOW else [pytest.mark.kafka], id=kind)
        for kind in KINDS
    ]
)
def peer(request: pytest.FixtureRequest, broker_factory: Callable[..., BrokerProcess]) -> Peer:
    """The broker under test: a fresh onceflow broker, or a shared 1-node Apache Kafka cluster
    with transaction version 2 or 1 (use `peer.name(...)` for topics and ids)."""
    if request.param == ONCEFLOW:
        return Peer(ONCEFLOW, broker=broker_factory(FAST_GROUP_BROKER))
    clusters: KafkaClusters = request.getfixturevalue("kafka_clusters")
    cluster = clusters.get(1, TRANSACTION_VERSION[request.param])
    return Peer(request.param, cluster=cluster)


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    """A broker with SSL, SASL_SSL and SASL_PLAINTEXT listeners (`support.secure_broker`),
    shared by the tests of a module."""
    broker = start_secure_broker(tmp_path_factory.mktemp("secure") / "data", pki)
    yield broker
    broker.stop()
