"""The consume-transform-produce application (tests/support/eos_app.py) under ACLs: exactly the
ACLs docs/security.md lists for it ("The ACLs of a consume-transform-produce application",
read from the docs by support/ctp_acls.py) are enough, and each of them is needed.

One broker with a SASL_PLAINTEXT listener (SCRAM-SHA-512), the standard authorizer, a super
user `admin` and the application's user, both bootstrapped from config. The admin creates the
topics and the docs' ACLs for the application's principal, then, for each client
(confluent-kafka and onceflow's own):

1. input records are written and the application (logged in as its user) runs until it has
   committed all of them: the output topic read with read_committed holds each exactly once;
2. for each ACL of the table in turn: the admin deletes it, writes fresh input, and runs the
   application again. It must exit with status 4 and log `authorization failed` with the error
   of that resource type, and leave nothing half-written: the read_committed output and the
   group's committed offsets are what they were before, and no transaction holds the output's
   last stable offset below its high watermark. Then the ACL is added back;
3. the WRITE on the transactional id is taken away while the application holds a transaction
   whose records are in the output log (`--hold-file`): it cannot commit or abort (both need
   that ACL), exits with status 4, and the coordinator aborts the transaction when it times
   out: the read_committed output never shows its records, and the last stable offset comes
   back to the high watermark;
4. with the whole table again, the application processes the input the failed runs left and
   the output holds every input record exactly once.

A run that should fail gets `--exit-after` the pending input, so an ACL the application does
not need shows as a run that ends with status 0.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    IsolationLevel,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from support.ctp_acls import DocAcl, read_ctp_acls
from support.eos_app import EXIT_DENIED, exactly_once_problems, transform
from support.peers import GROUP_BROKER_CONFIG
from support.sasl_broker import scram_config, start_sasl_broker
from support.topic_reader import confluent_read_to_end

APP = Path(__file__).resolve().parent.parent / "support" / "eos_app.py"
DOC = read_ctp_acls()
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
APP_PASSWORD = "app-secret"
MECHANISM = "SCRAM-SHA-512"
PARTITIONS = 2
RECORDS_PER_RUN = 100
TXN_TIMEOUT_MS = 10_000
TIMEOUT_S = 60.0
DENIED_ERROR = {
    "TOPIC": "TOPIC_AUTHORIZATION_FAILED",
    "GROUP": "GROUP_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
}


@pytest.fixture
def secured(tmp_path):
    users = ";".join(
        f"{MECHANISM}=[name={name},password={password}]"
        for name, password in ((ADMIN, ADMIN_PASSWORD), (DOC.user, APP_PASSWORD))
    )
    broker = start_sasl_broker(
        tmp_path / "data",
        **GROUP_BROKER_CONFIG,
        **{
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN}",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
            "onceflow.sasl.bootstrap.users": users,
        },
    )
    yield broker
    broker.stop()


def binding(acl: DocAcl) -> AclBinding:
    return AclBinding(
        ResourceType[acl.resource_type],
        acl.name,
        ResourcePatternType.LITERAL,
        DOC.principal,
        "*",
        AclOperation[acl.operation],
        AclPermissionType.ALLOW,
    )


class Admin:
    """What the super user does: topics, ACLs, input, and reading the application's results."""

    def __init__(self, broker) -> None:
        self.config = scram_config(broker, MECHANISM, ADMIN, ADMIN_PASSWORD)
        self.client = AdminClient(self.config)

    def create_topics(self) -> None:
        topics = [NewTopic(t, PARTITIONS, 1) for t in (DOC.input_topic, DOC.output_topic)]
        for future in self.client.create_topics(topics).values():
            future.result(TIMEOUT_S)

    def add_acls(self, acls) -> None:
        for future in self.client.create_acls([binding(acl) for acl in acls]).values():
            future.result(TIMEOUT_S)

    def remove_acl(self, acl: DocAcl) -> None:
        wanted = binding(acl)
        acl_filter = AclBindingFilter(
            wanted.restype,
            wanted.name,
            wanted.resource_pattern_type,
            wanted.principal,
            wanted.host,
            wanted.operation,
            wanted.permission_type,
        )
        [future] = self.client.delete_acls([acl_filter]).values()
        assert future.result(TIMEOUT_S) == [wanted]

    def write_input(self, run: int) -> dict[tuple[int, int], bytes]:
        """RECORDS_PER_RUN fresh input records: {(partition, offset): value}."""
        written: dict[tuple[int, int], bytes] = {}

        def delivered(err, msg) -> None:
            assert err is None, err
            written[(msg.partition(), msg.offset())] = msg.value()

        producer = Producer({**self.config, "enable.idempotence": True, "linger.ms": 5})
        for seq in range(RECORDS_PER_RUN):
            value = b"run%02d-record%04d" % (run, seq)
            partition = seq % PARTITIONS
            producer.produce(DOC.input_topic, value, partition=partition, on_delivery=delivered)
        assert producer.flush(TIMEOUT_S) == 0
        assert len(written) == RECORDS_PER_RUN
        return written

    def read_output(self, isolation: str = "read_committed") -> list[tuple[int, bytes]]:
        """The output topic's records visible at `isolation`: (partition, value) in log order."""
        records = confluent_read_to_end(self.config, DOC.output_topic, PARTITIONS, isolation)
        return [(partition, value) for partition, _offset, value in records]

    def committed_offsets(self) -> dict[int, int]:
        """The application group's committed offsets on the input (-1001 when none)."""
        consumer = Consumer({**self.config, "group.id": DOC.group, "enable.auto.commit": False})
        try:
            wanted = [TopicPartition(DOC.input_topic, p) for p in range(PARTITIONS)]
            return {tp.partition: tp.offset for tp in consumer.committed(wanted, TIMEOUT_S)}
        finally:
            consumer.close()

    def end_offsets(self, topic: str, isolation: IsolationLevel) -> dict[int, int]:
        """High watermarks (READ_UNCOMMITTED) or last stable offsets (READ_COMMITTED)."""
        wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        futures = self.client.list_offsets(wanted, isolation_level=isolation)
        return {tp.partition: future.result(TIMEOUT_S).offset for tp, future in futures.items()}

    def wait_for_stable_output(self) -> None:
        """Until the output's last stable offset equals its high watermark on every partition:
        at once when the application ended its transaction, or once the transaction timeout
        made the coordinator abort it."""
        topic = DOC.output_topic
        deadline = time.monotonic() + TXN_TIMEOUT_MS / 1000 + TIMEOUT_S
        while True:
            high = self.end_offsets(topic, IsolationLevel.READ_UNCOMMITTED)
            stable = self.end_offsets(topic, IsolationLevel.READ_COMMITTED)
            if stable == high:
                return
            assert time.monotonic() < deadline, f"LSO {stable} held below HW {high}"
            time.sleep(0.5)


def start_app(broker, client: str, log_path: Path, exit_after: int, hold: Path | None = None):
    """The application, logged in as the docs' principal."""
    login = scram_config(broker, MECHANISM, DOC.user, APP_PASSWORD)
    command = [
        sys.executable,
        str(APP),
        "--client",
        client,
        "--bootstrap",
        login.pop("bootstrap.servers"),
        "--input",
        DOC.input_topic,
        "--output",
        DOC.output_topic,
        "--group",
        DOC.group,
        "--transactional-id",
        DOC.transactional_id,
        "--transaction-timeout-ms",
        str(TXN_TIMEOUT_MS),
        *(arg for key, value in login.items() for arg in ("-X", f"{key}={value}")),
    ]
    command += ["--exit-after", str(exit_after)]
    if hold is not None:
        command += ["--hold-file", str(hold)]
    with open(log_path, "wb") as log:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)


def wait_app(app: subprocess.Popen, log_path: Path) -> int:
    """The application's exit status (killed, and the test failed, if it does not exit)."""
    try:
        return app.wait(TIMEOUT_S * 2)
    except subprocess.TimeoutExpired as exc:
        app.kill()
        app.wait()
        raise AssertionError(
            f"the application did not exit\n{log_path.read_text()[-3000:]}"
        ) from exc


def run_app(broker, client: str, log_path: Path, exit_after: int) -> int:
    """Run the application until it exits; returns its exit status."""
    return wait_app(start_app(broker, client, log_path, exit_after), log_path)


def assert_denied(status: int, log_path: Path, acl: DocAcl) -> None:
    log_text = log_path.read_text()
    assert status == EXIT_DENIED, f"without {acl}: exit {status}\n{log_text[-3000:]}"
    assert "authorization failed" in log_text, log_text[-3000:]
    assert DENIED_ERROR[acl.resource_type] in log_text, log_text[-3000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("client", ["confluent", "onceflow"])
def test_ctp_app_runs_with_the_docs_acls_and_fails_cleanly_without_each(secured, client, tmp_path):
    admin = Admin(secured)
    admin.create_topics()
    admin.add_acls(DOC.acls)

    inputs = admin.write_input(0)
    status = run_app(secured, client, tmp_path / "full.log", exit_after=RECORDS_PER_RUN)
    assert status == 0, (tmp_path / "full.log").read_text()[-3000:]
    assert exactly_once_problems(admin.read_output(), inputs) == []

    processed = len(inputs)
    for run, acl in enumerate(DOC.acls, start=1):
        admin.remove_acl(acl)
        inputs.update(admin.write_input(run))
        output_before = sorted(admin.read_output())
        offsets_before = admin.committed_offsets()
        log_path = tmp_path / f"without-{acl.label}.log"
        assert_denied(run_app(secured, client, log_path, len(inputs) - processed), log_path, acl)
        admin.wait_for_stable_output()
        assert sorted(admin.read_output()) == output_before, f"without {acl}"
        assert admin.committed_offsets() == offsets_before, f"without {acl}"
        admin.add_acls([acl])

    revoke_mid_transaction(secured, client, admin, inputs, processed, tmp_path)

    status = run_app(secured, client, tmp_path / "again.log", len(inputs) - processed)
    assert status == 0, (tmp_path / "again.log").read_text()[-3000:]
    assert exactly_once_problems(admin.read_output(), inputs) == []


def revoke_mid_transaction(broker, client, admin: Admin, inputs, processed: int, tmp_path) -> None:
    """Step 3: the transactional id's WRITE goes while a transaction holds records in the
    output log; the coordinator's timeout is what ends that transaction."""
    [acl] = [acl for acl in DOC.acls if acl.resource_type == "TRANSACTIONAL_ID"]
    inputs.update(admin.write_input(len(DOC.acls) + 1))
    output_before = sorted(admin.read_output())
    uncommitted_before = len(admin.read_output("read_uncommitted"))
    offsets_before = admin.committed_offsets()
    log_path, hold = tmp_path / "revoked.log", tmp_path / "hold"
    held = Path(f"{hold}.held")
    hold.touch()
    app = start_app(broker, client, log_path, len(inputs) - processed, hold)
    deadline = time.monotonic() + TIMEOUT_S
    while not held.exists():
        assert app.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
        time.sleep(0.05)
    admin.remove_acl(acl)
    hold.unlink()
    assert_denied(wait_app(app, log_path), log_path, acl)
    admin.wait_for_stable_output()
    assert sorted(admin.read_output()) == output_before
    assert admin.committed_offsets() == offsets_before
    uncommitted = len(admin.read_output("read_uncommitted"))
    assert uncommitted > uncommitted_before, "the held transaction wrote nothing to the log"
    admin.add_acls([acl])


def test_exactly_once_checker_names_duplicates_gaps_and_strangers():
    inputs = {(0, 0): b"a", (0, 1): b"b", (1, 0): b"c"}
    good = [(0, transform(0, 0, b"a")), (0, transform(0, 1, b"b")), (1, transform(1, 0, b"c"))]
    assert exactly_once_problems(good, inputs) == []
    [duplicated, missing] = exactly_once_problems([*good[:2], good[0]], inputs)
    assert "1 inputs duplicated" in duplicated and "1 inputs missing" in missing
    assert exactly_once_problems([*good, (1, transform(1, 0, b"x"))], inputs)[0].startswith("wrong")
    assert exactly_once_problems([*good, (1, transform(0, 0, b"a"))], inputs)[0].startswith("unex")
