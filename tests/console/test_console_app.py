"""`onceflow console` against a live broker: a scripted state (an open transaction pinning the
LSO of orders-0, a committed one before it, a consumer group with lag, a Spark query's markers
with one task behind) read back through the JSON API and the HTML pages, and the command
itself served over HTTP from a subprocess; the core of it on Apache Kafka too (`peer`)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from support.broker import BrokerProcess
from support.console import ConsoleProcess
from support.peers import Peer
from support.spark_daemons import free_port

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.consumer import Consumer
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition
from onceflow.console.app import create_app
from onceflow.console.markers import split_marker_group
from onceflow.spark.markers import QueryMarker, TaskMarker, query_group, task_group

TOPIC = "orders"
GROUP = "billing"
PREFIX = "etl.orders"  # a prefix with a dot: the console must split marker group names right
PINNER = "pinner-txn"
COMMITTED_RECORDS = 3
OPEN_RECORDS = 2
GROUP_COMMITTED = 1
LIVE_GROUP = "shipping"  # a group with a member, subscribed to TOPIC
LIVE_COMMITTED = 2
CLIENT_ID = "<b>shipper</b>"  # markup in a client.id must show as text


@dataclass
class Scenario:
    bootstrap: str
    pinner: Producer
    member: Consumer


def _transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions()
    producer.begin_transaction()
    return producer


def _send(producer: Producer, count: int, topic: str = TOPIC) -> None:
    for i in range(count):
        producer.send(topic, value=f"v{i}".encode(), partition=0)
    producer.flush(timeout=30)


MARKER_MS = 1_795_000_000_000  # 2026-11-18 11:06:40 UTC


def _commit_markers(admin: AdminClient) -> None:
    where = TopicPartition(TOPIC, 1)
    admin.alter_consumer_group_offsets(
        query_group(PREFIX), {where: QueryMarker("q-1", 5, 2, MARKER_MS).committed()}
    )
    for task, batch in ((0, 5), (1, 4)):
        marker = TaskMarker("q-1", batch, 10 + task, "abc", TOPIC, (7, 0), MARKER_MS - task)
        committed = marker.committed()
        offsets = {where: (committed.offset, committed.metadata)}
        admin.alter_consumer_group_offsets(task_group(PREFIX, task), offsets)
    # a marker group another tool wrote into: listed with the error, not a failed page
    admin.alter_consumer_group_offsets(query_group("broken"), {where: (3, "not json")})


def _join(bootstrap: str) -> Consumer:
    """A member of LIVE_GROUP holding both partitions of TOPIC, its offset committed."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": LIVE_GROUP,
            "client.id": CLIENT_ID,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer was never assigned partitions"
        consumer.poll(timeout=0.2)
    consumer.commit({TopicPartition(TOPIC, 0): LIVE_COMMITTED})
    return consumer


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    with BrokerProcess(tmp_path_factory.mktemp("console") / "data") as broker:
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic(TOPIC, 2)])[TOPIC].raise_for_error()
            committer = _transactional(broker.bootstrap, "committer-txn")
            _send(committer, COMMITTED_RECORDS)
            committer.commit_transaction()
            committer.close()
            pinner = _transactional(broker.bootstrap, PINNER)
            _send(pinner, OPEN_RECORDS)
            admin.alter_consumer_group_offsets(
                GROUP, {TopicPartition(TOPIC, 0): (GROUP_COMMITTED, "")}
            )
            _commit_markers(admin)
        member = _join(broker.bootstrap)
        yield Scenario(broker.bootstrap, pinner, member)
        member.close()
        pinner.close(timeout=5)


def _client(scenario: Scenario, hanging_after_ms: int | None = None) -> TestClient:
    return TestClient(create_app({"bootstrap.servers": scenario.bootstrap}, hanging_after_ms))


def test_topic_shows_the_open_transaction_pinning_the_lso(scenario: Scenario) -> None:
    with _client(scenario) as client:
        data = client.get(f"/api/topics/{TOPIC}").json()
        p0, p1 = data["partitions"]
        # 3 committed records and their COMMIT marker, then the open transaction's 2 records
        lso = COMMITTED_RECORDS + 1
        assert (p0["log_start_offset"], p0["last_stable_offset"]) == (0, lso)
        assert p0["high_watermark"] == lso + OPEN_RECORDS
        assert p0["lso_lag"] == OPEN_RECORDS
        assert p0["pinned_by"]["transactional_id"] == PINNER
        assert p0["pinned_by"]["current_txn_start_offset"] == lso
        assert {p["transactional_id"] for p in p0["producers"]} == {"committer-txn", PINNER}
        assert p1["lso_lag"] == 0 and p1["pinned_by"] is None and p1["producers"] == []
        assert p1["lso_lag_ms"] is None
        (pinner,) = [
            t for t in client.get("/api/transactions").json()["transactions"]
            if t["transactional_id"] == PINNER
        ]  # fmt: skip
        # the LSO has waited as long as the pinning transaction is old (two requests apart)
        assert 0 <= p0["lso_lag_ms"] <= pinner["age_ms"] <= p0["lso_lag_ms"] + 5_000
        html = client.get(f"/topics/{TOPIC}").text
        assert f"{PINNER} (producer id {p0['pinned_by']['producer_id']}" in html
        assert re.search(f"<td>{lso}</td><td>{OPEN_RECORDS}</td><td>[0-9]+</td>", html)
        partial = client.get(f"/topics/{TOPIC}?partial=1").text  # what the page polls
        assert partial.startswith(f"<h1>Topic {TOPIC}</h1>") and "<html>" not in partial
        assert f"{PINNER} (producer id" in partial


def test_transactions_and_hanging_filter(scenario: Scenario) -> None:
    with _client(scenario) as client:  # threshold: the broker's transaction.max.timeout.ms
        data = client.get("/api/transactions").json()
        rows = {r["transactional_id"]: r for r in data["transactions"]}
        assert rows[PINNER]["state"] == "Ongoing"
        assert rows[PINNER]["partitions"] == [f"{TOPIC}-0"]
        assert rows[PINNER]["age_ms"] >= 0 and not rows[PINNER]["hanging"]
        assert rows["committer-txn"]["state"] == "CompleteCommit"
        assert rows["committer-txn"]["age_ms"] == -1
        assert client.get("/api/overview").json()["hanging_transactions"] == 0
    with _client(scenario, hanging_after_ms=1) as client:
        overview = client.get("/api/overview").json()
        assert (overview["open_transactions"], overview["hanging_transactions"]) == (1, 1)
        html = client.get("/transactions?hanging=1").text
        assert PINNER in html and "committer-txn" not in html


def test_groups_lag_against_the_lso(scenario: Scenario) -> None:
    lso = COMMITTED_RECORDS + 1
    lag, live_lag = lso - GROUP_COMMITTED, lso - LIVE_COMMITTED
    with _client(scenario) as client:
        billing, shipping = client.get("/api/groups").json()  # marker groups are not listed
        assert billing["group_id"] == GROUP and billing["total_lag"] == lag
        assert billing["members"] == []
        assert billing["offsets"] == [
            {"topic": TOPIC, "partition": 0, "committed_offset": GROUP_COMMITTED,
             "last_stable_offset": lso, "lag": lag}
        ]  # fmt: skip
        assert (shipping["group_id"], shipping["state"]) == (LIVE_GROUP, "Stable")
        (member,) = shipping["members"]
        assert sorted(member["assignment"]) == [f"{TOPIC}-0", f"{TOPIC}-1"]
        assert [(o["partition"], o["lag"]) for o in shipping["offsets"]] == [(0, live_lag)]
        overview = client.get("/api/overview").json()
        assert overview["groups"] == [
            {"group_id": GROUP, "state": "Empty", "members": 0, "total_lag": lag},
            {"group_id": LIVE_GROUP, "state": "Stable", "members": 1, "total_lag": live_lag},
        ]
        assert (overview["topic_count"], overview["partition_count"]) == (1, 2)
        assert f"<td>{GROUP}</td><td>Empty</td><td>0</td><td>{lag}</td>" in client.get("/").text
        assert member["client_id"] == CLIENT_ID
        html = client.get("/groups").text
        assert f"<td>{escape(member['member_id'])}</td>" in html
        assert "<td>&lt;b&gt;shipper&lt;/b&gt;</td>" in html and CLIENT_ID not in html
        assert f"<td>{TOPIC}</td><td>0</td><td>{LIVE_COMMITTED}</td><td>{lso}</td>" in html


def test_spark_markers_per_query(scenario: Scenario) -> None:
    with _client(scenario) as client:
        broken, query = client.get("/api/spark").json()
        assert (broken["prefix"], broken["batch_id"], broken["task_markers"]) == ("broken", -1, [])
        (error,) = broken["errors"]
        assert error.startswith("onceflow-markers.broken.query: The progress marker of consumer")
        assert (query["prefix"], query["query_id"], query["batch_id"]) == (PREFIX, "q-1", 5)
        assert [(t["task_partition"], t["batch_id"]) for t in query["task_markers"]] == [
            (0, 5), (1, 4)
        ]  # fmt: skip
        assert query["tasks_behind"] == [1] and query["errors"] == []
        assert query["written_ms"] == MARKER_MS
        assert [t["written_ms"] for t in query["task_markers"]] == [MARKER_MS, MARKER_MS - 1]
        html = client.get("/spark").text
        assert "tasks behind: 1" in html and "not one this onceflow version writes" in html
        assert "committed 5 at 2026-11-18T11:06:40Z (" in html
        assert "<td>2026-11-18T11:06:39Z (" in html  # task partition 1's marker


@pytest.mark.parametrize(
    ("group_id", "split"),
    [
        ("onceflow-markers.etl.orders.query", ("etl.orders", "query")),
        ("onceflow-markers.p.alive", ("p", "alive")),
        ("onceflow-markers.p.task-12", ("p", "task-12")),
        ("onceflow-markers.query", None),  # no prefix
        ("onceflow-markers.p.other", None),
        ("billing", None),
    ],
)
def test_split_marker_group(group_id: str, split: tuple[str, str] | None) -> None:
    assert split_marker_group(group_id) == split


def test_bad_input_and_unreachable_cluster_give_clear_pages(scenario: Scenario) -> None:
    with _client(scenario) as client:
        missing = client.get("/topics/no-such-topic")
        assert missing.status_code == 404 and "no topic &#x27;no-such-topic&#x27;" in missing.text
        assert client.get("/api/topics/no-such-topic").json() == {
            "error": "The cluster has no topic 'no-such-topic'."
        }
        bad = client.get(f"/api/topics/{TOPIC}/messages?offset=x")
        assert bad.status_code == 400
        assert bad.json() == {"error": "offset 'x' is not a whole number."}
    config = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "request.timeout.ms": 2000}
    with TestClient(create_app(config)) as client:
        down = client.get("/api/overview")
        assert down.status_code == 503 and "did not answer" in down.json()["error"]


def test_console_command_serves_over_http(scenario: Scenario, tmp_path: Path) -> None:
    with ConsoleProcess(scenario.bootstrap, tmp_path / "console.log") as console:
        html = console.get("/")
        assert f'<a href="/topics/{TOPIC}">{TOPIC}</a>' in html
        assert "<title>Overview · onceflow</title>" in html


def test_pinned_lso_and_group_lag_on_every_peer(peer: Peer) -> None:
    """The same facts through the same admin requests on onceflow and on Apache Kafka."""
    topic, group, txn_id = peer.name("console-t"), peer.name("console-g"), peer.name("pin")
    with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].raise_for_error()
        committed = Producer({"bootstrap.servers": peer.bootstrap})
        _send(committed, COMMITTED_RECORDS, topic)  # idempotent, no transaction: LSO moves on
        committed.close()
        pinner = _transactional(peer.bootstrap, txn_id)
        _send(pinner, OPEN_RECORDS, topic)
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): (1, "")})
    try:
        with TestClient(create_app({"bootstrap.servers": peer.bootstrap})) as client:
            (p0,) = client.get(f"/api/topics/{topic}").json()["partitions"]
            assert (p0["last_stable_offset"], p0["lso_lag"]) == (COMMITTED_RECORDS, OPEN_RECORDS)
            assert p0["pinned_by"]["transactional_id"] == txn_id
            # a shared Kafka cluster holds other tests' ids: the page is filtered to this one's
            rows = client.get(f"/api/transactions?prefix={txn_id}").json()["transactions"]
            (mine,) = [r for r in rows if r["transactional_id"] == txn_id]
            assert (mine["state"], mine["partitions"]) == ("Ongoing", [f"{topic}-0"])
            groups = {g["group_id"]: g for g in client.get("/api/groups").json()}
            assert groups[group]["total_lag"] == COMMITTED_RECORDS - 1
            # the message browser stops at the LSO, or reads on into the open transaction
            browse = f"/api/topics/{topic}/messages?offset=0&isolation="
            committed_view = client.get(browse + "read_committed").json()
            assert [m["offset"] for m in committed_view["messages"]] == [0, 1, 2]
            assert committed_view["messages"][0]["value"]["text"] == "v0"
            uncommitted = client.get(browse + "read_uncommitted").json()["messages"]
            assert [m["value"]["text"] for m in uncommitted] == ["v0", "v1", "v2", "v0", "v1"]
    finally:
        pinner.abort_transaction()
        pinner.close(timeout=5)


def test_transactions_page_links_the_abort_of_a_hanging_one(scenario: Scenario) -> None:
    config = {"bootstrap.servers": scenario.bootstrap}
    with TestClient(create_app(config, hanging_after_ms=1, allow_actions=True)) as client:
        (pinner,) = [
            t for t in client.get("/api/transactions").json()["transactions"]
            if t["transactional_id"] == PINNER
        ]  # fmt: skip
        href = f"/actions/abort?topic={TOPIC}&partition=0&producer_id={pinner['producer_id']}"
        assert (
            f'<a href="{escape(href)}">abort on {TOPIC}-0</a>' in client.get("/transactions").text
        )
        confirm = client.get(href).text
        assert f"Abort the open transaction of producer {pinner['producer_id']}" in confirm
        token = re.search('name="csrf_token" value="([^"]+)"', confirm)
        assert token is not None
        form = {"topic": TOPIC, "partition": "0", "csrf_token": token.group(1)}
        # another site's page posting the console's form (with a token it somehow got)
        foreign = client.post(
            "/actions/abort",
            data={**form, "producer_id": str(pinner["producer_id"])},
            headers={"Origin": "http://elsewhere.example"},
        )
        assert foreign.status_code == 403 and "CSRF" in foreign.text
        # a producer with no open transaction there: the broker is not asked to abort anything
        absent = client.post("/actions/abort", data={**form, "producer_id": "424242"})
        assert absent.status_code == 409
        assert f"producer 424242 has no open transaction on {TOPIC}-0" in absent.text
    with _client(scenario) as client:  # actions off: no links
        assert "abort on" not in client.get("/transactions?hanging=1").text


def test_reset_page_of_a_group_whose_id_holds_a_slash(scenario: Scenario) -> None:
    config = {"bootstrap.servers": scenario.bootstrap}
    with AdminClient(config) as admin:
        admin.alter_consumer_group_offsets("team/a", {TopicPartition(TOPIC, 1): (0, "")})
    try:
        with TestClient(create_app(config, allow_actions=True)) as client:
            groups = client.get("/groups").text
            assert '<a href="/groups/team%2Fa/reset">reset offsets…</a>' in groups
            form = client.get("/groups/team%2Fa/reset")
            assert form.status_code == 200 and "<h1>Reset offsets of team/a</h1>" in form.text
    finally:  # the other tests count the groups
        with AdminClient(config) as admin:
            admin.delete_groups(["team/a"])


def test_a_browse_reading_does_not_hold_up_other_pages(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The browser's consumer reads for up to 10 s outside the console's cluster lock: another
    page is served meanwhile."""
    import threading

    from onceflow.console import browse as browse_module

    reading, other_served = threading.Event(), threading.Event()
    served_while_reading: list[bool] = []

    def slow_read(*args: object) -> list[object]:
        reading.set()  # held here until another page is served (30 s at most: no deadlock)
        served_while_reading.append(other_served.wait(30))
        return []

    monkeypatch.setattr(browse_module, "_read", slow_read)
    with _client(scenario) as client:
        answers: list[int] = []
        browse = threading.Thread(
            target=lambda: answers.append(
                client.get(f"/api/topics/{TOPIC}/messages?offset=0").status_code
            )
        )
        browse.start()
        assert reading.wait(30)
        assert client.get("/api/groups").status_code == 200
        other_served.set()
        browse.join(60)
    assert answers == [200]
    assert served_while_reading == [True], "the groups page waited for the browse's reading"
