"""`onceflow console --allow-actions` driven in a headless Chromium against a live broker.

The scripted state: on `orders` three committed records (a key, a JSON value, a header, a
fixed timestamp), one aborted record, and then an open transaction of `pinner-txn` pinning
partition 0's last stable offset; on `hung` a transaction no coordinator knows
(tests/support/hung_txn.py), which the test aborts from the topic page; on `big` one record
larger than the browser shows; group `billing` with lag and no members, group `shipping` with a
live member. Every page is checked for the numbers that state implies, and saved as a
screenshot (tests/support/browser.py says where). One broker, one console and one browser
serve the whole module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from support.broker import BrokerProcess
from support.browser import VIEWPORT, launch_chromium, screenshot, table_row
from support.console import ConsoleProcess
from support.hung_txn import (
    HUNG_PRODUCER_ID,
    hang_a_transaction,
    last_stable_offset,
    open_transaction,
)

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.consumer import Consumer
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition
from onceflow.console.browse import MAX_SHOWN_BYTES

pytestmark = pytest.mark.timeout(300)

TOPIC, HUNG, BIG = "orders", "hung", "big"
PINNER = "pinner-txn"
COMMITTED = [  # (key, value, headers, timestamp)
    (b"k0", json.dumps({"order": 0, "item": "tea"}).encode(), [("source", b"web")],
     1_700_000_000_000),
    (b"k1", b"\x00\xffbinary", [], 1_700_000_001_000),
    (b"k2", "caf\u00e9".encode(), [("trace", None)], 1_700_000_002_000),
]  # fmt: skip
ABORTED = b"aborted"  # one record of an aborted transaction, after the committed ones
OPEN_RECORDS = 2
ABORTED_OFFSET = len(COMMITTED) + 1  # after the committed records and their COMMIT marker
LSO = ABORTED_OFFSET + 2  # the aborted record and its ABORT marker
BILLING, BILLING_COMMITTED = "billing", 1
SHIPPING = "shipping"
BIG_SIZE = 100_000


@dataclass
class Scenario:
    bootstrap: str
    admin: AdminClient
    console: ConsoleProcess
    page: Any  # a Playwright Page on the console


def _script_state(bootstrap: str, admin: AdminClient) -> Producer:
    for name, partitions in ((TOPIC, 2), (HUNG, 1), (BIG, 1)):
        admin.create_topics([NewTopic(name, partitions)])[name].raise_for_error()
    committer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "committer-txn"})
    committer.init_transactions()
    committer.begin_transaction()
    for key, value, headers, timestamp in COMMITTED:
        committer.send(TOPIC, value, key, partition=0, headers=headers, timestamp=timestamp)
    committer.commit_transaction()
    committer.begin_transaction()
    committer.send(TOPIC, ABORTED, partition=0)
    committer.flush(timeout=30)  # written, then aborted
    committer.abort_transaction()
    committer.close()
    pinner = open_transaction(bootstrap, TOPIC, PINNER, OPEN_RECORDS)
    hang_a_transaction(bootstrap, HUNG)
    big = Producer({"bootstrap.servers": bootstrap})
    big.send(BIG, b"x" * BIG_SIZE, partition=0).get(timeout=30)
    big.close()
    admin.alter_consumer_group_offsets(BILLING, {TopicPartition(TOPIC, 0): (BILLING_COMMITTED, "")})
    return pinner


def _join(bootstrap: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": SHIPPING})
    consumer.subscribe([TOPIC])
    while not consumer.assignment():
        consumer.poll(timeout=0.2)
    return consumer


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    work = tmp_path_factory.mktemp("console-browser")
    config = {"transaction.state.log.num.partitions": 3,
              "onceflow.admin.allow.write.txn.markers": True}  # fmt: skip
    with launch_chromium() as browser, BrokerProcess(work / "data", config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        pinner = _script_state(broker.bootstrap, admin)
        member = _join(broker.bootstrap)
        args = ("--allow-actions", "--hanging-after-ms", "60000")
        try:
            with ConsoleProcess(broker.bootstrap, work / "console.log", *args) as console:
                page = browser.new_page(viewport=VIEWPORT)
                yield Scenario(broker.bootstrap, admin, console, page)
        finally:
            member.close()
            pinner.close(timeout=5)
            admin.close()


def _open(s: Scenario, path: str) -> Any:
    """Load `path` in the browser; the response (its status)."""
    return s.page.goto(s.console.url + path)


def _row(s: Scenario, table: int, first_cell: str) -> list[str]:
    return table_row(s.page, table, first_cell)


def test_overview_counts_the_open_transaction(scenario: Scenario) -> None:
    assert _open(scenario, "/").status == 200
    facts = scenario.page.locator("main table").first.locator("td").all_inner_texts()
    # brokers, topics, partitions, open transactions, hanging (the hung one has no id)
    assert facts == ["1", "3", "4", "1", "0"]
    screenshot(scenario.page, "overview", for_docs=True)


def test_topic_page_shows_the_transaction_pinning_the_lso(scenario: Scenario) -> None:
    assert _open(scenario, f"/topics/{TOPIC}").status == 200
    cells = _row(scenario, 0, "0")
    headers = scenario.page.locator("main table").first.locator("th").all_inner_texts()
    assert len(headers) == len(cells) and headers[6:8] == ["LSO lag (ms)", "LSO pinned by"]
    # partition, leader, log start, high watermark, LSO, LSO lag, its age, pinned by, error
    assert cells[2:6] == ["0", str(LSO + OPEN_RECORDS), str(LSO), str(OPEN_RECORDS)]
    assert cells[7].startswith(f"{PINNER} (producer id ") and f"open since offset {LSO}" in cells[7]
    assert _row(scenario, 0, "1")[2:6] == ["0", "0", "0", "0"]
    screenshot(scenario.page, "topic", for_docs=True)


def test_message_browser_read_committed_and_uncommitted(scenario: Scenario) -> None:
    page = scenario.page
    _open(scenario, f"/topics/{TOPIC}")
    page.click("text=Browse messages")
    page.fill("#offset", "0")
    page.select_option("#format", "json")
    page.click("#browse button")
    page.wait_for_selector("#count")
    offsets = [int(o) for o in page.locator("main table tr td:first-child").all_inner_texts()]
    # read_committed: neither the aborted record nor the open transaction's are read
    assert offsets == [0, 1, 2]
    first = page.locator("main table tr").nth(1).inner_text()
    assert '"item": "tea"' in first and "source:" in first and "web" in first
    assert f"json, {len(COMMITTED[0][1])} bytes" in first
    second = page.locator("main table tr").nth(2).inner_text()
    assert "00 ff 62 69 6e" in second and "hex, 8 bytes" in second  # not UTF-8: shown as hex
    assert "café" in page.locator("main table tr").nth(3).inner_text()
    screenshot(page, "messages", for_docs=True)

    page.select_option("#isolation", "read_uncommitted")
    page.select_option("#format", "hex")
    page.click("#browse button")
    page.wait_for_selector("#count")
    offsets = [int(o) for o in page.locator("main table tr td:first-child").all_inner_texts()]
    assert offsets == [0, 1, 2, ABORTED_OFFSET, LSO, LSO + 1]  # markers are no records
    assert ABORTED.hex(" ") in page.locator("main table tr").nth(4).inner_text()
    assert "6f 70 65 6e 2d 30" in page.locator("main table tr").nth(5).inner_text()  # "open-0"

    page.fill("#offset", "")
    page.fill("#timestamp", str(COMMITTED[1][3]))
    page.select_option("#isolation", "read_committed")
    page.click("#browse button")
    page.wait_for_selector("#count")
    offsets = [int(o) for o in page.locator("main table tr td:first-child").all_inner_texts()]
    assert offsets == [1, 2]


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/topics/no-such-topic", 404, "The cluster has no topic 'no-such-topic'."),
        ("/topics/no-such-topic/messages", 404, "The cluster has no topic 'no-such-topic'."),
        (f"/topics/{TOPIC}/messages?offset=abc", 400, "offset 'abc' is not a whole number."),
        (f"/topics/{TOPIC}/messages?offset=999", 400, "offset 999 is outside partition 0's"),
        (f"/topics/{TOPIC}/messages?partition=7", 400, "Topic 'orders' has 2 partition(s)"),
        (f"/topics/{TOPIC}/messages?offset=1&timestamp=5", 400, "not both"),
        (f"/topics/{TOPIC}/messages?limit=100000", 400, "limit 100000 is outside 1..500."),
        (f"/topics/{TOPIC}/messages?format=xml", 400, "format 'xml' is not one of"),
        ("/actions/abort?topic=orders&partition=x&producer_id=1", 400, "partition 'x' is not"),
    ],
)
def test_bad_input_gives_a_clear_page(
    scenario: Scenario, path: str, status: int, says: str
) -> None:
    response = _open(scenario, path)
    assert response.status == status
    text = scenario.page.locator("main").inner_text()
    assert says in text and "Traceback" not in scenario.page.content()


def test_huge_message_is_shown_cut(scenario: Scenario) -> None:
    assert _open(scenario, f"/topics/{BIG}/messages?offset=0").status == 200
    value = scenario.page.locator("main table tr").nth(1).locator("td").nth(3)
    assert f"text, {BIG_SIZE} bytes, cut" in value.inner_text()
    assert value.locator("pre").inner_text() == "x" * MAX_SHOWN_BYTES
    screenshot(scenario.page, "huge-message")


def test_abort_a_hanging_transaction_from_the_topic_page(scenario: Scenario) -> None:
    page = scenario.page
    assert last_stable_offset(scenario.bootstrap, HUNG) == 1  # pinned by the hung batch
    _open(scenario, f"/topics/{HUNG}")
    assert f"producer {HUNG_PRODUCER_ID}" in _row(scenario, 0, "0")[7]
    page.click("text=abort…")
    assert "open since offset 1?" in page.locator("main").inner_text()  # it asks first
    assert last_stable_offset(scenario.bootstrap, HUNG) == 1
    screenshot(page, "abort-confirm", for_docs=True)
    page.click("#confirm-abort")
    # the ABORT marker is offset 2: nothing pins the LSO any more
    assert page.locator("#outcome").inner_text().endswith("its last stable offset is now 3.")
    assert last_stable_offset(scenario.bootstrap, HUNG) == 3
    screenshot(page, "abort-done")
    _open(scenario, f"/topics/{HUNG}")
    assert _row(scenario, 0, "0")[4:8] == ["3", "0", "", ""]


def test_groups_lag_and_reset_offsets_dry_run_first(scenario: Scenario) -> None:
    page = scenario.page
    _open(scenario, "/groups")
    assert f"total lag {LSO - BILLING_COMMITTED}" in page.locator("main").inner_text()
    assert _row(scenario, 1, TOPIC) == [TOPIC, "0", str(BILLING_COMMITTED), str(LSO),
                                        str(LSO - BILLING_COMMITTED)]  # fmt: skip
    screenshot(page, "groups", for_docs=True)
    page.click(f"a[href='/groups/{BILLING}/reset']")
    page.select_option("#topic", TOPIC)
    page.select_option("#strategy", "to-offset")
    page.fill("#value", "2")
    page.click("#dry-run")
    assert _row(scenario, 0, TOPIC) == [TOPIC, "0", str(BILLING_COMMITTED), "2"]
    assert [TOPIC, "1", "", "0"] in [  # to-offset is kept within each partition's offsets
        [c.strip() for c in r.locator("td").all_inner_texts()]
        for r in page.locator("main table tr").all()
    ]
    committed = scenario.admin.list_consumer_group_offsets(BILLING, None, require_stable=False)
    assert committed[TopicPartition(TOPIC, 0)] == (BILLING_COMMITTED, "")  # a dry run only
    screenshot(page, "reset-dry-run", for_docs=True)
    page.click("#execute-reset")
    assert page.locator("#outcome").inner_text() == "The new offsets are committed."
    committed = scenario.admin.list_consumer_group_offsets(BILLING, None, require_stable=False)
    assert committed[TopicPartition(TOPIC, 0)] == (2, "")
    assert committed[TopicPartition(TOPIC, 1)] == (0, "")


def test_reset_is_refused_for_a_group_with_members(scenario: Scenario) -> None:
    page = scenario.page
    _open(scenario, f"/groups/{SHIPPING}/reset")
    page.select_option("#topic", TOPIC)
    page.select_option("#strategy", "to-earliest")
    page.click("#dry-run")
    text = page.locator("main").inner_text()
    assert f"Offsets can only be reset while group '{SHIPPING}' is inactive" in text
    assert "it is Stable." in text


def test_groups_page_updates_without_a_reload(scenario: Scenario) -> None:
    page = scenario.page
    _open(scenario, "/groups")
    page.evaluate("window.notReloaded = true")
    scenario.admin.alter_consumer_group_offsets(BILLING, {TopicPartition(TOPIC, 0): (LSO, "")})
    want = f"{TOPIC}\t0\t{LSO}\t{LSO}\t0"
    page.wait_for_function(
        "want => [...document.querySelectorAll('main tr')].some(r => r.innerText === want)",
        arg=want,
        timeout=30_000,
    )
    assert page.evaluate("window.notReloaded") is True


def test_transactions_pages_and_filters_survive_the_polling(scenario: Scenario) -> None:
    page = scenario.page
    assert _open(scenario, "/transactions?limit=1").status == 200
    # counts over every id: committer-txn (CompleteAbort) and PINNER (Ongoing)
    assert page.locator("main table").first.locator("td").all_inner_texts() == ["2", "1", "0"]
    assert _row(scenario, 1, "committer-txn")[1] == "CompleteAbort"
    page.locator("main a", has_text="next page").first.click()
    page.wait_for_url("**/transactions?page=2&limit=1")
    assert _row(scenario, 1, PINNER)[1] == "Ongoing"
    assert page.locator("main table").nth(1).locator("tr").count() == 2  # header, one row
    page.locator("main select[name=state]").select_option("Ongoing")
    page.locator("main input[name=limit]").fill("5")
    page.locator("main button", has_text="Show").click()
    page.wait_for_url("**/transactions?state=Ongoing&prefix=&limit=5")
    page.evaluate("window.notReloaded = true; document.querySelector('main h1').id = 'stale'")
    page.wait_for_function("!document.getElementById('stale')", timeout=30_000)  # polled
    assert page.evaluate("window.notReloaded") is True
    texts = page.locator("main table").nth(1).locator("tr td:first-child").all_inner_texts()
    assert texts == [PINNER] and "Page 1 of 1: rows 1-1 of 1." in page.inner_text("main")
    screenshot(page, "transactions-filtered")
    bad = _open(scenario, "/transactions?state=Running")
    assert bad is not None and bad.status == 400
    assert "state 'Running' is not one of Kafka's" in page.inner_text("main")


def test_forms_need_the_csrf_token(scenario: Scenario) -> None:
    page = scenario.page
    _open(scenario, "/")
    answer = page.evaluate(
        """async () => {
            const r = await fetch('/actions/abort', {method: 'POST',
                body: new URLSearchParams({topic: 'orders', partition: '0', producer_id: '1'})});
            return [r.status, await r.text()];
        }"""
    )
    assert answer[0] == 403 and "CSRF token is missing or stale" in answer[1]


def test_actions_are_off_without_allow_actions(scenario: Scenario, tmp_path: Any) -> None:
    with ConsoleProcess(scenario.bootstrap, tmp_path / "console.log") as read_only:
        page = scenario.page
        page.goto(f"{read_only.url}/topics/{TOPIC}")
        assert page.locator("text=abort…").count() == 0
        response = page.goto(
            f"{read_only.url}/actions/abort?topic=orders&partition=0&producer_id=1"
        )
        assert response.status == 403
        assert "Actions are off" in page.locator("main").inner_text()
        page.goto(f"{read_only.url}/groups")
        assert page.locator("text=reset offsets…").count() == 0
        assert "total lag" in page.locator("main").inner_text()
