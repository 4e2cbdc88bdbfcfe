"""The console's abort action on a broker with Kafka's StandardAuthorizer, in a headless
Chromium: the console logs in over SASL (SCRAM-SHA-512) as `alice`, who may look at everything
but holds no CLUSTER_ACTION on the cluster, so the broker refuses the abort and the page says
so; once an administrator grants alice that ACL, the same click aborts the transaction.

The broker's PLAINTEXT listener is the administrator (`super.users=User:ANONYMOUS`): it sets up
the topic, the open transaction and the ACLs. One broker, one console, one browser.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.browser import VIEWPORT, launch_chromium, screenshot
from support.console import ConsoleProcess
from support.hung_txn import last_stable_offset
from support.sasl_broker import start_sasl_broker

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.security import acl
from onceflow.security.acl import AclOperation, ResourceType

pytestmark = pytest.mark.timeout(300)

ALICE, PASSWORD = "alice", "alice-pw"
TOPIC, PINNER = "orders", "pinner-txn"
OPEN_RECORDS = 2
# what alice may do: read and describe everything, but not CLUSTER_ACTION
VIEWER_ACLS = {
    (ResourceType.TOPIC, acl.WILDCARD_RESOURCE): (AclOperation.READ, AclOperation.DESCRIBE),
    (ResourceType.GROUP, acl.WILDCARD_RESOURCE): (AclOperation.DESCRIBE,),
    (ResourceType.TRANSACTIONAL_ID, acl.WILDCARD_RESOURCE): (AclOperation.DESCRIBE,),
    (ResourceType.CLUSTER, acl.CLUSTER_NAME): (
        AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS
    ),
}  # fmt: skip


@dataclass
class Scenario:
    broker: Any
    admin: AdminClient  # the administrator
    console: ConsoleProcess  # alice's
    page: Any


def _allow_alice(admin: AdminClient, resource: ResourceType, name: str, op: AclOperation) -> None:
    pattern = acl.ResourcePattern(resource, name, acl.PatternType.LITERAL)
    entry = acl.AccessControlEntry(f"User:{ALICE}", "*", op, acl.PermissionType.ALLOW)
    (result,) = admin.create_acls([acl.AclBinding(pattern, entry)])
    assert result.error_code == 0, result


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    work = tmp_path_factory.mktemp("console-acl")
    with launch_chromium() as browser:
        yield from _scenario(work, browser)


def _scenario(work: Path, browser: Any) -> Iterator[Scenario]:
    broker = start_sasl_broker(
        work / "data",
        **{
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS",
            "onceflow.sasl.bootstrap.users": f"SCRAM-SHA-512=[name={ALICE},password={PASSWORD}]",
            "onceflow.admin.allow.write.txn.markers": True,
        },
    )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    pinner = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": PINNER})
    try:
        admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].raise_for_error()
        for (resource, name), operations in VIEWER_ACLS.items():
            for op in operations:
                _allow_alice(admin, resource, name, op)
        pinner.init_transactions()
        pinner.begin_transaction()
        for i in range(OPEN_RECORDS):
            pinner.send(TOPIC, f"open-{i}".encode(), partition=0)
        pinner.flush(timeout=30)
        login = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512",
                 f"sasl.username={ALICE}", f"sasl.password={PASSWORD}"]  # fmt: skip
        args = ["--allow-actions", *(a for kv in login for a in ("-X", kv))]
        with ConsoleProcess(broker.sasl_bootstrap, work / "console.log", *args) as console:
            yield Scenario(broker, admin, console, browser.new_page(viewport=VIEWPORT))
    finally:
        pinner.close(timeout=5)
        admin.close()
        broker.stop()


def _abort_from_the_topic_page(s: Scenario) -> Any:
    """Open the topic page as alice, follow the abort link, confirm; the POST's response."""
    s.page.goto(f"{s.console.url}/topics/{TOPIC}")
    s.page.click("text=abort…")
    with s.page.expect_navigation() as navigation:
        s.page.click("#confirm-abort")
    return navigation.value


def test_abort_is_refused_without_cluster_action(scenario: Scenario) -> None:
    assert last_stable_offset(scenario.broker.bootstrap, TOPIC) == 0
    response = _abort_from_the_topic_page(scenario)
    assert response.status == 403
    outcome = scenario.page.locator("#outcome").inner_text()
    assert outcome == "The broker refused: CLUSTER_AUTHORIZATION_FAILED"
    screenshot(scenario.page, "abort-refused", for_docs=True)
    assert last_stable_offset(scenario.broker.bootstrap, TOPIC) == 0  # still pinned


def test_abort_goes_through_once_alice_holds_cluster_action(scenario: Scenario) -> None:
    _allow_alice(
        scenario.admin, ResourceType.CLUSTER, acl.CLUSTER_NAME, AclOperation.CLUSTER_ACTION
    )
    response = _abort_from_the_topic_page(scenario)
    assert response.status == 200
    after = OPEN_RECORDS + 1  # the open records and the ABORT marker
    outcome = scenario.page.locator("#outcome").inner_text()
    assert outcome.endswith(f"its last stable offset is now {after}.")
    assert last_stable_offset(scenario.broker.bootstrap, TOPIC) == after
