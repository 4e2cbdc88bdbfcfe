"""The console's actions, partition sizes and throughput sparkline in a headless Chromium, on
onceflow's broker and on Apache Kafka 4.4 with transaction versions 2 and 1 (`peer`).

The scripted state: topic `orders` (2 partitions) with an open transaction of a live producer
on partition 0, and group `billing` with an offset committed on it and no members. The test
aborts that transaction from the topic page and resets the group from the groups page (dry run
first), as an operator would.

Why an open transaction of a live producer and not a hung one (tests/support/hung_txn.py, which
test_console_browser.py aborts on onceflow's broker): Apache Kafka 4.x refuses to make one. A
transactional batch in a Produce request without a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and with one the partition leader first asks the
transaction coordinator whether the partition is in that id's transaction (KIP-890's
verification, on by default), which fails for a producer id the coordinator does not know
(INVALID_PRODUCER_ID_MAPPING on Kafka 4.4, transaction versions 2 and 1). The
abort itself (DescribeProducers, then WriteTxnMarkers with the producer's id, epoch and
coordinator epoch, as Kafka's `Admin.abortTransaction`) is the same for both.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import VIEWPORT, launch_chromium, screenshot, table_row
from support.console import ConsoleProcess
from support.hung_txn import last_stable_offset, open_transaction
from support.peers import Peer

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition

pytestmark = pytest.mark.timeout(300)

OPEN_RECORDS = 2
GROUP_COMMITTED = 1
PRODUCED = 50  # records the sparkline must see
SPARKLINE_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launch_chromium() as chromium:
        yield chromium


def _shot(peer: Peer, page: Any, name: str, for_docs: bool = False) -> None:
    screenshot(page, f"{peer.kind}-{name}", for_docs=False)
    if for_docs and not peer.is_kafka:
        screenshot(page, name, for_docs=True)


def test_abort_reset_and_sizes_on_every_peer(peer: Peer, browser: Any, tmp_path: Path) -> None:
    topic, group, txn_id = peer.name("orders"), peer.name("billing"), peer.name("pinner")
    with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2)])[topic].raise_for_error()
        pinner = open_transaction(peer.bootstrap, topic, txn_id, OPEN_RECORDS)
        tp0 = TopicPartition(topic, 0)
        admin.alter_consumer_group_offsets(group, {tp0: (GROUP_COMMITTED, "")})
        try:
            with ConsoleProcess(peer.bootstrap, tmp_path / "console.log",
                                "--allow-actions") as console:  # fmt: skip
                page = browser.new_page(viewport=VIEWPORT)
                _sizes_and_abort(peer, page, console, topic)
                _reset(peer, page, console, admin, topic, group)
                page.close()
        finally:
            pinner.close(timeout=5)


def _sizes_and_abort(peer: Peer, page: Any, console: ConsoleProcess, topic: str) -> None:
    assert last_stable_offset(peer.bootstrap, topic) == 0
    assert page.goto(f"{console.url}/topics/{topic}").status == 200
    headers = page.locator("main table").first.locator("th").all_inner_texts()
    size_column = headers.index("size (bytes)")
    row0, row1 = table_row(page, 0, "0"), table_row(page, 0, "1")
    assert int(row0[size_column]) > 0  # two records in one batch
    assert row1[size_column] == "0"  # nothing written to partition 1
    _shot(peer, page, "topic-sizes")
    page.click("text=abort…")
    assert "open since offset 0?" in page.locator("main").inner_text()
    assert last_stable_offset(peer.bootstrap, topic) == 0  # it asks first
    page.click("#confirm-abort")
    after = OPEN_RECORDS + 1  # the open records and the ABORT marker
    outcome = page.locator("#outcome").inner_text()
    assert outcome.endswith(f"its last stable offset is now {after}."), outcome
    assert last_stable_offset(peer.bootstrap, topic) == after
    _shot(peer, page, "abort-done")
    page.goto(f"{console.url}/topics/{topic}")
    assert table_row(page, 0, "0")[3:8] == [str(after), str(after), "0", "", ""]


def _reset(
    peer: Peer, page: Any, console: ConsoleProcess, admin: AdminClient, topic: str, group: str
) -> None:
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    high_watermark = OPEN_RECORDS + 1
    page.goto(f"{console.url}/groups/{group}/reset")
    page.select_option("#topic", topic)
    page.select_option("#strategy", "to-latest")
    page.click("#dry-run")
    assert table_row(page, 0, topic) == [topic, "0", str(GROUP_COMMITTED), str(high_watermark)]
    committed = admin.list_consumer_group_offsets(group, None, require_stable=False)
    assert committed[tp0] == (GROUP_COMMITTED, "")  # a dry run only
    _shot(peer, page, "reset-dry-run")
    page.click("#execute-reset")
    assert page.locator("#outcome").inner_text() == "The new offsets are committed."
    committed = admin.list_consumer_group_offsets(group, None, require_stable=False)
    assert (committed[tp0], committed[tp1]) == ((high_watermark, ""), (0, ""))


def _overview(console: ConsoleProcess) -> dict[str, Any]:
    with urllib.request.urlopen(f"{console.url}/api/overview", timeout=30) as answer:
        data: dict[str, Any] = json.load(answer)
    return data


def test_overview_sparkline_shows_records_produced(
    peer: Peer, browser: Any, tmp_path: Path
) -> None:
    topic = peer.name("feed")
    with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2)])[topic].raise_for_error()
    with ConsoleProcess(peer.bootstrap, tmp_path / "console.log") as console:
        _overview(console)  # the first poll: high watermarks to measure from
        producer = Producer({"bootstrap.servers": peer.bootstrap})
        for i in range(PRODUCED):
            producer.send(topic, f"r{i}".encode(), partition=i % 2)
        producer.flush(timeout=30)
        producer.close()
        deadline = time.monotonic() + SPARKLINE_TIMEOUT_S
        while True:  # until the records are measured, in at least the two points a line needs
            samples = _overview(console)["throughput"]
            if sum(s["records"] for s in samples) >= PRODUCED and len(samples) >= 2:
                break
            assert time.monotonic() < deadline, samples
            time.sleep(1.1)  # polls closer than a second measure nothing new
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(console.url + "/")
        label = page.locator("#throughput svg").get_attribute("aria-label")
        assert label is not None and "records/s now" in label
        points = page.locator("#throughput polyline").get_attribute("points")
        assert points is not None and len(points.split()) >= 2
        heights = {float(p.split(",")[1]) for p in points.split()}
        assert len(heights) > 1  # not a flat line: the records show as a rise
        _shot(peer, page, "overview-sparkline", for_docs=True)
        page.close()
