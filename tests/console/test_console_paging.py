"""The transactions page a page at a time (issue 22), against a live broker: 25 transactional
ids with no transaction (`Empty`) and 2 with an open one (`Ongoing`). Paging boundaries, the
filters combined, counts over every id whatever the page, only the page's ids (and the open
ones) described, and parameters the page cannot use answered with a 400 page."""

from __future__ import annotations

import time
from collections.abc import Iterator
from html import escape
from typing import Any

import pytest
from starlette.testclient import TestClient
from support.broker import BrokerProcess

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.console.app import create_app

TOPIC = "paged"
EMPTY = [f"page-{i:02d}" for i in range(25)]
OPEN = ["open-a", "open-b"]
ALL = sorted(EMPTY + OPEN)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with BrokerProcess(tmp_path_factory.mktemp("paging") / "data") as broker:
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].raise_for_error()
        for transactional_id in EMPTY:
            with Producer(
                {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id}
            ) as producer:
                producer.init_transactions()
        pinners = []
        for transactional_id in OPEN:
            producer = Producer(
                {"bootstrap.servers": broker.bootstrap, "transactional.id": transactional_id}
            )
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(TOPIC, value=b"v", partition=0)
            producer.flush(timeout=30)
            pinners.append(producer)
        time.sleep(0.01)  # both open longer than 1 ms: hanging with hanging_after_ms=1
        yield broker.bootstrap
        for producer in pinners:
            producer.close(timeout=5)


def _client(bootstrap: str, hanging_after_ms: int | None = None) -> TestClient:
    return TestClient(create_app({"bootstrap.servers": bootstrap}, hanging_after_ms))


def _ids(client: TestClient, query: str) -> list[str]:
    response = client.get(f"/api/transactions?{query}")
    assert response.status_code == 200, response.text
    return [r["transactional_id"] for r in response.json()["transactions"]]


def test_pages_cover_every_id_once_in_order(bootstrap: str) -> None:
    with _client(bootstrap) as client:
        pages = [_ids(client, f"limit=10&page={page}") for page in (1, 2, 3)]
        assert [len(p) for p in pages] == [10, 10, 7]
        assert sum(pages, []) == ALL
        data = client.get("/api/transactions?limit=10&page=4").json()
        assert (data["transactions"], data["matched"], data["pages"]) == ([], 27, 3)
        assert client.get("/api/transactions?limit=27").json()["pages"] == 1
        last = client.get("/api/transactions?limit=26&page=2").json()
        assert (last["pages"], [r["transactional_id"] for r in last["transactions"]]) == (
            2,
            ALL[-1:],
        )
        default = client.get("/api/transactions").json()  # 100 a page: all 27 on one
        assert (default["query"]["page"], default["query"]["limit"]) == (1, 100)
        assert [r["transactional_id"] for r in default["transactions"]] == ALL


def test_filters_combined_and_counts_over_every_id(bootstrap: str) -> None:
    with _client(bootstrap) as client:
        assert _ids(client, "prefix=page-1") == [f"page-1{i}" for i in range(10)]
        assert _ids(client, "state=Empty&prefix=page-1&limit=4&page=3") == ["page-18", "page-19"]
        assert _ids(client, "state=Ongoing") == OPEN
        assert _ids(client, "state=Ongoing&state=Empty&prefix=open-") == OPEN
        assert _ids(client, "state=CompleteCommit") == []
        assert _ids(client, "hanging=1") == []  # threshold: transaction.max.timeout.ms
        data = client.get("/api/transactions?prefix=page-2&limit=2").json()
        counts = (data["total_transactions"], data["open_transactions"], data["matched"])
        assert counts == (27, 2, 5)
    with _client(bootstrap, hanging_after_ms=1) as client:
        assert _ids(client, "hanging=1") == OPEN
        assert _ids(client, "hanging=1&prefix=open-b") == ["open-b"]
        assert _ids(client, "hanging=1&state=Empty") == []
        data = client.get("/api/transactions?prefix=page-&limit=1").json()
        assert (data["open_transactions"], data["hanging_transactions"]) == (2, 2)


def test_only_the_page_and_the_open_ids_are_described(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    described: list[list[str]] = []
    original = AdminClient.describe_transactions

    def counting(self: AdminClient, ids: Any) -> Any:
        described.append(list(ids))
        return original(self, ids)

    monkeypatch.setattr(AdminClient, "describe_transactions", counting)
    with _client(bootstrap) as client:
        shown = _ids(client, "limit=5&page=2")
    assert shown == ALL[5:10]
    assert len(described) <= 2  # the open ids, then the page's other ids
    assert sorted(sum(described, [])) == sorted(set(OPEN) | set(shown))


def test_links_and_polling_keep_the_filters(bootstrap: str) -> None:
    with _client(bootstrap) as client:
        html = client.get("/transactions?state=Empty&prefix=page-&limit=5&page=2").text
        assert "Page 2 of 5: rows 6-10 of 25." in html
        previous = "/transactions?state=Empty&prefix=page-&limit=5"
        after = "/transactions?state=Empty&prefix=page-&page=3&limit=5"
        assert f'<a href="{escape(previous)}">previous page</a>' in html
        assert f'<a href="{escape(after)}">next page</a>' in html
        only_hanging = "/transactions?state=Empty&hanging=1&prefix=page-&limit=5"  # page 1
        assert f'<a href="{escape(only_hanging)}">only hanging</a>' in html
        assert "<td>page-05</td>" in html and "<td>page-10</td>" not in html
        assert "<option selected>Empty</option>" in html and 'value="page-"' in html
        partial = client.get("/transactions?state=Empty&prefix=page-&limit=5&page=2&partial=1")
        assert partial.text.startswith("<h1>Transactions</h1>") and "<html>" not in partial.text
        assert "<td>page-05</td>" in partial.text and "<td>page-04</td>" not in partial.text
        last = client.get("/transactions?state=Empty&prefix=page-&limit=5&page=5").text
        assert "previous page" in last and "next page" not in last
        first = client.get("/transactions?limit=5").text
        assert "previous page" not in first and "next page" in first


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("page=-1", "page must be from 1 to 1000000000, not -1."),
        ("page=0", "page must be from 1 to 1000000000, not 0."),
        ("page=two", "page 'two' is not a whole number."),
        ("limit=1000000", "limit must be from 1 to 1000, not 1000000."),
        ("state=Running", "state 'Running' is not one of Kafka's"),
        ("hanging=yes", "hanging must be 1 or 0, not 'yes'."),
    ],
)
def test_bad_parameters_give_a_400_page(bootstrap: str, query: str, message: str) -> None:
    with _client(bootstrap) as client:
        api = client.get(f"/api/transactions?{query}")
        assert api.status_code == 400 and api.json()["error"].startswith(message)
        page = client.get(f"/transactions?{query}")
        assert page.status_code == 400 and escape(message) in page.text
        assert "Traceback" not in page.text and "<nav>" in page.text
