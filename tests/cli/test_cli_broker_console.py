"""`onceflow broker --console HOST:PORT` as a process: the broker serves the web console for
itself from the same process; its pages show the broker's own topics and an open transaction
(and, when the broker has a metrics listener, its own metrics), and the console stops with
the broker. A malformed address is a usage error (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.broker import BrokerProcess
from support.hung_txn import open_transaction
from support.spark_daemons import free_port

from onceflow.client.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(120)

TOPIC, TXN_ID, OPEN_RECORDS = "orders", "pinner-txn", 2


class BrokerWithConsole(BrokerProcess):
    """`onceflow broker ... --console 127.0.0.1:PORT` (a free port)."""

    def __init__(self, data_dir: Path, extra_config: dict[str, object] | None = None) -> None:
        self.console_port = free_port()
        self.console_url = f"http://127.0.0.1:{self.console_port}"
        super().__init__(data_dir, extra_config)

    def command(self, port: int) -> list[str]:
        return [*super().command(port), "--console", f"127.0.0.1:{self.console_port}"]

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"{self.console_url}{path}", timeout=30) as answer:
            return str(answer.read().decode())


def test_broker_serves_its_console(tmp_path: Path) -> None:
    with BrokerWithConsole(tmp_path / "data") as broker:
        # the console is up once the ready line is out
        assert f"console on {broker.console_url}/" in broker.log_text()
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].raise_for_error()
        pinner = open_transaction(broker.bootstrap, TOPIC, TXN_ID, OPEN_RECORDS)
        try:
            overview = json.loads(broker.get("/api/overview"))
            assert (overview["topic_count"], overview["partition_count"]) == (1, 2)
            assert overview["open_transactions"] == 1
            assert [b["port"] for b in overview["brokers"]] == [broker.port]
            assert overview["broker_metrics"] is None  # no onceflow.metrics.listener
            page = broker.get(f"/topics/{TOPIC}")
            assert f"{TXN_ID} (producer id " in page and "<h1>Topic orders</h1>" in page
            assert "abort…" not in page  # read-only
        finally:
            pinner.close(timeout=5)
        assert broker.stop() == 0
    with pytest.raises(urllib.error.URLError):  # the console went with the broker
        urllib.request.urlopen(f"{broker.console_url}/api/overview", timeout=5)


def test_broker_console_reads_its_own_metrics(tmp_path: Path) -> None:
    metrics_port = free_port()
    config = {"onceflow.metrics.listener": f"0.0.0.0:{metrics_port}"}  # reached on loopback
    with BrokerWithConsole(tmp_path / "data", config) as broker:
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].raise_for_error()
        pinner = open_transaction(broker.bootstrap, TOPIC, TXN_ID, OPEN_RECORDS)
        try:
            figures = json.loads(broker.get("/api/overview"))["broker_metrics"]
            page = broker.get("/")
        finally:
            pinner.close(timeout=5)
    assert figures["url"] == f"http://127.0.0.1:{metrics_port}/metrics"
    assert figures["error"] is None
    assert figures["open_transactions"] == 1 and figures["produce_requests"] >= 1
    assert "<tr><td>open transactions</td><td>1</td></tr>" in page


def test_bad_console_address_exits_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "broker", "--data-dir", str(tmp_path / "d"),
         "--listen", "127.0.0.1:0", "--console", "nowhere"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--console 'nowhere': expected HOST:PORT" in result.stderr
