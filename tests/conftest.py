"""Fixtures shared by all tests: `broker` (a fresh broker process), `broker_factory`,
`proxied` (a broker behind the fault-injecting proxy) and `pki` (test certificates)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from support.broker import BrokerProcess  # noqa: E402
from support.pki import OPENSSL, Pki, make_pki  # noqa: E402
from support.proxy import KafkaProxy  # noqa: E402


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
