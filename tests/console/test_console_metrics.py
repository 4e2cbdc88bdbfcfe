"""The console with an onceflow broker's `/metrics` (`create_app(..., metrics_url=...)`):
the overview's "Broker metrics" panel and `/api/overview`'s `broker_metrics` hold the numbers
the broker's Prometheus text gives for a scripted state (two committed transactions of one
id, an aborted and an open one, a fenced producer, a compacted topic the cleaner has
cleaned); a topic page shows its compacted partitions' cleaning; an endpoint that is down,
answers 404 or answers garbage is a note on a page that still renders; without an endpoint
the pages have no panel. The last test runs `onceflow console --metrics-url` and looks at the
panel in a headless Chromium (screenshots: tests/support/browser.py)."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from support.broker import BrokerProcess
from support.browser import VIEWPORT, launch_chromium, screenshot
from support.console import ConsoleProcess
from support.hung_txn import open_transaction
from support.prometheus import parse_samples
from support.spark_daemons import free_port

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.console.app import create_app

pytestmark = pytest.mark.timeout(180)

TOPIC, TABLE = "orders", "table"
FENCED_ID, PINNER = "fenced-txn", "pinner-txn"


@dataclass
class Scenario:
    bootstrap: str
    metrics_url: str
    pinner: Producer

    def metrics_text(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as answer:
            return str(answer.read().decode())


def _transactions(bootstrap: str, transactional_id: str, *commits: bool) -> None:
    """One producer's transactions, one record each, committed or aborted as `commits` say."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions()
    for commit in commits:
        producer.begin_transaction()
        producer.send(TOPIC, b"v", partition=1)
        producer.flush(timeout=30)
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()


def _fence(bootstrap: str) -> None:
    """Two producers init the same transactional id: the second fences the first."""
    first = Producer({"bootstrap.servers": bootstrap, "transactional.id": FENCED_ID})
    first.init_transactions()
    second = Producer({"bootstrap.servers": bootstrap, "transactional.id": FENCED_ID})
    second.init_transactions()
    second.close()
    first.close(timeout=5)


def _compact(bootstrap: str, scenario: Scenario) -> None:
    """Fill a compacted topic with superseded keys and wait for the cleaner's first round."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(300):
        producer.send(TABLE, b"value-%05d" % i, b"key-%d" % (i % 5), partition=0)
        producer.flush(timeout=30)
    producer.close()
    deadline = time.monotonic() + 60
    key = f'onceflow_partition_last_cleaned_timestamp_ms{{topic="{TABLE}",partition="0"}}'
    while parse_samples(scenario.metrics_text()).get(key, -1) < 0:
        assert time.monotonic() < deadline, "the cleaner never cleaned the compacted topic"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    metrics_port = free_port()
    config = {
        "onceflow.metrics.listener": f"127.0.0.1:{metrics_port}",
        "log.cleaner.backoff.ms": 100,
        "log.cleaner.min.cleanable.ratio": "0.01",
    }
    with BrokerProcess(tmp_path_factory.mktemp("metrics") / "data", config) as broker:
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].raise_for_error()
            compacted = {"cleanup.policy": "compact", "segment.bytes": "2000"}
            admin.create_topics([NewTopic(TABLE, 1, config=compacted)])[TABLE].raise_for_error()
        _transactions(broker.bootstrap, "committer-txn", True, True)  # two commits
        _transactions(broker.bootstrap, "aborter-txn", False)
        _fence(broker.bootstrap)
        pinner = open_transaction(broker.bootstrap, TOPIC, PINNER, 2)
        found = Scenario(broker.bootstrap, url, pinner)
        _compact(broker.bootstrap, found)
        yield found
        pinner.close(timeout=5)


def _client(bootstrap: str, metrics_url: str | None) -> TestClient:
    return TestClient(create_app({"bootstrap.servers": bootstrap}, metrics_url=metrics_url))


def _flush_figures(samples: dict[str, float]) -> tuple[int, float, float]:
    """(flushes, mean ms, upper bound in ms of the bucket holding the median) from the text."""
    count = int(samples["onceflow_log_flush_seconds_count"])
    buckets = sorted(
        (float(key.split('le="')[1].rstrip('"}')), value)
        for key, value in samples.items()
        if key.startswith("onceflow_log_flush_seconds_bucket")
    )
    median = next(bound for bound, cumulative in buckets if cumulative >= count / 2)
    mean = samples["onceflow_log_flush_seconds_sum"] / count * 1000
    return count, round(mean, 3), round(median * 1000, 3)


def test_overview_carries_the_broker_metrics(scenario: Scenario) -> None:
    with _client(scenario.bootstrap, scenario.metrics_url) as client:
        figures = client.get("/api/overview").json()["broker_metrics"]
        samples = parse_samples(scenario.metrics_text())  # the broker's own numbers
    assert figures["error"] is None and figures["url"] == scenario.metrics_url
    # the scripted state, as the broker counts it
    assert figures["fenced_producers"] == samples["onceflow_producers_fenced_total"] == 1
    committed = samples['onceflow_transactional_ids{state="CompleteCommit"}']
    aborted = samples['onceflow_transactional_ids{state="CompleteAbort"}']
    assert (figures["committed_ids"], figures["aborted_ids"]) == (committed, aborted) == (1, 1)
    committed = samples["onceflow_transactions_committed_total"]
    aborted = samples["onceflow_transactions_aborted_total"]
    assert (figures["transactions_committed"], figures["transactions_aborted"]) == (2, 1)
    assert (committed, aborted) == (2, 1)
    assert figures["open_transactions"] == samples['onceflow_transactional_ids{state="Ongoing"}']
    assert figures["open_transactions"] == 1
    assert figures["hanging_transactions"] == samples["onceflow_transactions_hanging"] == 0
    assert figures["oldest_open_age_s"] > 0
    assert figures["cleaner_max_dirty_ratio"] == samples["onceflow_log_cleaner_max_dirty_ratio"]
    assert figures["cleaner_seconds_since_last_run"] >= 0
    produce = samples['onceflow_requests_total{api="PRODUCE"}']
    assert produce > 300  # one request per compacted record at least
    assert figures["produce_requests"] == produce
    # the console's own admin requests come between its scrape and this one: never fewer
    assert (
        0
        < figures["requests"]
        <= sum(v for k, v in samples.items() if k.startswith("onceflow_requests_total"))
    )
    count, mean_ms, median_ms = _flush_figures(samples)
    assert count > 0
    fsync = figures["fsync"]
    assert (fsync["flushes"], fsync["mean_ms"], fsync["p50_le_ms"]) == (count, mean_ms, median_ms)


def test_overview_panel_and_rates(scenario: Scenario) -> None:
    with _client(scenario.bootstrap, scenario.metrics_url) as client:
        first = client.get("/api/overview").json()["broker_metrics"]
        time.sleep(1.1)  # the rates need two scrapes at least a second apart
        page = client.get("/").text
        second = client.get("/api/overview").json()["broker_metrics"]
    assert first["requests_per_s"] is None  # one scrape: no rate yet
    assert second["requests_per_s"] > 0  # the console's own requests between the scrapes
    assert "<h2>Broker metrics</h2>" in page and 'id="broker-metrics"' in page
    assert "<tr><td>fenced producers (total)</td><td>1</td></tr>" in page
    assert "<tr><td>transactional ids, last committed</td><td>1</td></tr>" in page
    assert "<tr><td>transactional ids, last aborted</td><td>1</td></tr>" in page
    assert "<tr><td>open transactions</td><td>1</td></tr>" in page
    # nothing completed between the two scrapes: the totals, and a rate of 0
    assert second["committed_per_s"] == second["aborted_per_s"] == 0
    assert "<tr><td>transactions committed</td><td>2 (0/s)</td></tr>" in page
    assert "<tr><td>transactions aborted</td><td>1 (0/s)</td></tr>" in page
    assert page.index("Broker metrics") < page.index("<h2>Brokers</h2>")  # under the sparkline


def test_topic_page_shows_the_cleaning_of_compacted_partitions(scenario: Scenario) -> None:
    with _client(scenario.bootstrap, scenario.metrics_url) as client:
        view = client.get(f"/api/topics/{TABLE}").json()["broker_metrics"]
        page = client.get(f"/topics/{TABLE}").text
        plain = client.get(f"/topics/{TOPIC}").text
    samples = parse_samples(scenario.metrics_text())
    labels = f'{{topic="{TABLE}",partition="0"}}'
    stamp = samples[f"onceflow_partition_last_cleaned_timestamp_ms{labels}"]
    when = datetime.fromtimestamp(stamp / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ratio = samples[f"onceflow_partition_dirty_ratio{labels}"]
    assert view["cleaning"] == [{"partition": 0, "dirty_ratio": ratio, "last_cleaned": when}]
    assert "<h2>Log cleaning</h2>" in page and f"<td>{when}</td>" in page
    assert "Log cleaning" not in plain  # not compacted: nothing to show


class _Garbage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the handler's name is http.server's)
        bodies = {
            "/metrics": b"<html>this is not {Prometheus} text</html>\n",
            "/malformed": b"# TYPE onceflow_requests_total counter\n"
            b"onceflow_requests_total{api=PRODUCE} 1\n",  # the label value unquoted
        }
        body = bodies.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def garbage_url() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("path", "says"),
    [
        (None, "did not answer: [Errno 111] Connection refused"),
        ("/metrics", "serves no onceflow broker metrics (no onceflow_requests_total)"),
        ("/malformed", "did not answer Prometheus text: line 2 is not a Prometheus sample"),
        ("/nothing", "answered HTTP 404"),
    ],
)
def test_an_endpoint_down_or_wrong_is_a_note(
    scenario: Scenario, garbage_url: str, path: str | None, says: str
) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics" if path is None else garbage_url + path
    with _client(scenario.bootstrap, url) as client:
        overview = client.get("/api/overview")
        page = client.get("/")
        topic = client.get(f"/topics/{TABLE}")
    assert overview.status_code == page.status_code == topic.status_code == 200
    figures = overview.json()["broker_metrics"]
    assert says in figures["error"] and figures["fsync"] is None
    assert overview.json()["open_transactions"] == 1  # the rest of the page is unchanged
    assert "<h2>Broker metrics</h2>" in page.text and 'id="broker-metrics-error"' in page.text
    assert "Traceback" not in page.text and says.split(":")[0] in page.text
    assert says.split(":")[0] in topic.text


def test_without_an_endpoint_the_pages_have_no_panel(scenario: Scenario) -> None:
    with _client(scenario.bootstrap, None) as client:
        overview = client.get("/api/overview").json()
        page = client.get("/").text
        topic = client.get(f"/topics/{TABLE}").text
    assert overview["broker_metrics"] is None
    assert "Broker metrics" not in page and "Log cleaning" not in topic


def test_a_metrics_host_that_never_answers_holds_up_no_other_page(scenario: Scenario) -> None:
    """The scrape runs outside the console's cluster lock: while the overview waits on a host
    that takes the connection and never answers, the groups page is served."""
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{server.getsockname()[1]}/metrics"
    scraping, groups_served, overview_done = (threading.Event() for _ in range(3))
    served_first: list[bool] = []

    def silent_host() -> None:
        connection, _ = server.accept()
        scraping.set()
        groups_served.wait(30)  # then hang up: the scrape fails at once
        connection.close()

    host = threading.Thread(target=silent_host, daemon=True)
    host.start()
    with _client(scenario.bootstrap, url) as client:

        def overview() -> None:
            client.get("/api/overview")
            overview_done.set()

        asking = threading.Thread(target=overview)
        asking.start()
        assert scraping.wait(30)
        assert client.get("/api/groups").status_code == 200
        served_first.append(not overview_done.is_set())
        groups_served.set()
        asking.join(60)
    server.close()
    assert served_first == [True], "the groups page waited for the metrics scrape"


def _metrics_row(page: Any, figure: str) -> str:
    """The value the panel shows for `figure`."""
    for row in page.locator("#broker-metrics tr").all():
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        if cells and cells[0] == figure:
            return cells[1]
    raise AssertionError(f"no row {figure!r} in the broker metrics panel")


def test_the_panel_in_a_browser(scenario: Scenario, tmp_path: Path) -> None:
    args = ("--metrics-url", scenario.metrics_url)
    with (
        launch_chromium() as browser,
        ConsoleProcess(scenario.bootstrap, tmp_path / "console.log", *args) as console,
    ):
        page = browser.new_page(viewport=VIEWPORT)
        assert page.goto(console.url + "/").status == 200
        assert _metrics_row(page, "fenced producers (total)") == "1"
        assert _metrics_row(page, "transactional ids, last committed") == "1"
        assert _metrics_row(page, "transactional ids, last aborted") == "1"
        assert _metrics_row(page, "open transactions") == "1"
        assert _metrics_row(page, "transactions committed").startswith("2")
        assert _metrics_row(page, "fsync median").startswith("≤ ")
        # the page's polling brings a second scrape: the request rate appears without a reload
        page.wait_for_function(
            "[...document.querySelectorAll('#broker-metrics td')]"
            ".some(td => td.textContent.endsWith('/s)'))",
            timeout=30_000,
        )
        screenshot(page, "broker-metrics", for_docs=True)
        assert page.goto(f"{console.url}/topics/{TABLE}").status == 200
        assert page.locator("main h2", has_text="Log cleaning").count() == 1
        screenshot(page, "broker-metrics-topic")


def test_a_metrics_url_that_is_no_url_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "console", "--metrics-url", "127.0.0.1:9404"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--metrics-url '127.0.0.1:9404': expected http://HOST:PORT/metrics" in result.stderr
