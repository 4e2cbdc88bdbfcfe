"""`onceflow transactions list|describe|describe-producers|abort` against a live broker.

A deliberately hung transaction: a transactional batch produced without a transactional id
(so no coordinator tracks it, and Produce does not verify it) pins the last stable offset of
its partition. The CLI finds it with describe-producers and aborts it by start offset; the
partition's last stable offset then moves past it. A live confluent-kafka transaction shows up
in list and describe. A broker without `onceflow.admin.allow.write.txn.markers` refuses the
abort.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from interop.workload import create_topic
from support.hung_txn import HUNG_PRODUCER_ID, hang_a_transaction, last_stable_offset

from onceflow.cli.main import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _rows(out: str) -> list[dict[str, str]]:
    header, *lines = out.splitlines()
    names = header.split("\t")
    return [dict(zip(names, line.split("\t"), strict=True)) for line in lines]


def test_list_describe_and_abort_a_hung_transaction(broker_factory, capsys):
    broker = broker_factory(
        {"transaction.state.log.num.partitions": 3, "onceflow.admin.allow.write.txn.markers": True}
    )
    b = ("--bootstrap-server", broker.bootstrap)
    topic = "hung"
    create_topic(broker.bootstrap, topic, 1)
    hang_a_transaction(broker.bootstrap, topic)
    assert last_stable_offset(broker.bootstrap, topic) == 1  # pinned at the hung batch

    live = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "live-txn"})
    live.init_transactions(30)
    live.begin_transaction()
    live.produce(topic, value=b"live")
    live.flush(10)

    code, out, err = _run(capsys, "transactions", "list", *b)
    assert (code, err) == (0, "")
    assert [(r["TransactionalId"], r["TransactionState"]) for r in _rows(out)] == [
        ("live-txn", "Ongoing")
    ]
    code, out, _ = _run(capsys, "transactions", "list", *b, "--state", "CompleteCommit")
    assert code == 0 and _rows(out) == []
    code, out, _ = _run(capsys, "transactions", "list", *b, "--state", "ONGOING")
    assert code == 0 and [r["TransactionalId"] for r in _rows(out)] == ["live-txn"]

    code, out, _ = _run(capsys, "transactions", "describe", *b, "--transactional-id", "live-txn")
    assert code == 0
    (row,) = _rows(out)
    assert row["TransactionState"] == "Ongoing" and row["TopicPartitions"] == f"{topic}-0"
    assert int(row["TransactionDurationMs"]) >= 0 and row["ProducerEpoch"] == "0"

    code, out, _ = _run(
        capsys, "transactions", "describe-producers", *b, "--topic", topic, "--partition", "0"
    )
    assert code == 0
    starts = {r["ProducerId"]: r["CurrentTransactionStartOffset"] for r in _rows(out)}
    assert starts[str(HUNG_PRODUCER_ID)] == "1"
    assert len(starts) == 2  # the hung producer and the live transaction (offset 2)

    code, _, err = _run(
        capsys, "transactions", "abort", *b, "--topic", topic, "--partition", "0",
        "--start-offset", "5",
    )  # fmt: skip
    assert code == 1 and "no open transaction starts at offset 5" in err

    code, out, err = _run(
        capsys, "transactions", "abort", *b, "--topic", topic, "--partition", "0",
        "--start-offset", "1",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert f"producer {HUNG_PRODUCER_ID}" in out
    assert last_stable_offset(broker.bootstrap, topic) == 2  # now pinned by the live one only
    live.commit_transaction(30)
    deadline = time.monotonic() + 10  # the COMMIT marker follows EndTxn's answer
    while last_stable_offset(broker.bootstrap, topic) != 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert last_stable_offset(broker.bootstrap, topic) == 5  # ABORT marker at 3, COMMIT at 4

    code, _, err = _run(capsys, "transactions", "describe", *b, "--transactional-id", "nope")
    assert code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in err


def test_abort_is_refused_unless_the_broker_allows_it(broker_factory):
    broker = broker_factory({"transaction.state.log.num.partitions": 3})
    create_topic(broker.bootstrap, "hung", 1)
    hang_a_transaction(broker.bootstrap, "hung")
    proc = subprocess.run(
        [sys.executable, "-m", "onceflow", "transactions", "abort", "--bootstrap-server",
         broker.bootstrap, "--topic", "hung", "--partition", "0", "--producer-id",
         str(HUNG_PRODUCER_ID), "--producer-epoch", "0", "--coordinator-epoch", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "CLUSTER_AUTHORIZATION_FAILED" in proc.stderr
    assert "onceflow.admin.allow.write.txn.markers=true" in proc.stderr  # the way out
    assert last_stable_offset(broker.bootstrap, "hung") == 1


@pytest.mark.parametrize("argv", [["abort", "--topic", "t", "--partition", "0"]])
def test_abort_needs_a_target(broker, capsys, argv):
    code, _, err = _run(capsys, "transactions", *argv, "--bootstrap-server", broker.bootstrap)
    assert code == 1 and "give --start-offset" in err


def test_list_with_an_unknown_state_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["transactions", "list", "--state", "bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown state 'bogus'; one of Empty, Ongoing" in err


def test_find_hanging_reports_only_transactions_no_coordinator_will_end(broker_factory, capsys):
    broker = broker_factory(
        {"transaction.state.log.num.partitions": 3, "onceflow.admin.allow.write.txn.markers": True}
    )
    b = ("--bootstrap-server", broker.bootstrap)
    create_topic(broker.bootstrap, "hung", 1)
    create_topic(broker.bootstrap, "other", 2)
    hang_a_transaction(broker.bootstrap, "hung")
    live = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "live-txn"})
    live.init_transactions(30)
    live.begin_transaction()
    live.produce("hung", value=b"live", partition=0)
    live.produce("other", value=b"live", partition=1)
    live.flush(10)
    try:
        now = ("--max-transaction-timeout", "0")
        for scope in (("--topic", "hung"), ("--topic", "hung", "--partition", "0"),
                      ("--broker-id", "1")):  # fmt: skip
            code, out, err = _run(capsys, "transactions", "find-hanging", *b, *scope, *now)
            assert (code, err) == (0, "")
            found = [
                (r["Topic"], r["ProducerId"], r["StartOffset"], r["CoordinatorState"])
                for r in _rows(out)
            ]
            assert found == [("hung", str(HUNG_PRODUCER_ID), "1", "-")], scope
        code, out, _ = _run(capsys, "transactions", "find-hanging", *b, "--broker-id", "1")
        assert code == 0 and _rows(out) == []  # not open for 15 minutes yet
        code, out, _ = _run(capsys, "transactions", "find-hanging", *b, "--topic", "other", *now)
        assert code == 0 and _rows(out) == []  # only the live, coordinated transaction

        code, _, _ = _run(
            capsys, "transactions", "abort", *b, "--topic", "hung", "--partition", "0",
            "--start-offset", "1",
        )  # fmt: skip
        assert code == 0
        code, out, _ = _run(capsys, "transactions", "find-hanging", *b, "--broker-id", "1", *now)
        assert code == 0 and _rows(out) == []
    finally:
        live.abort_transaction(30)
    code, _, err = _run(capsys, "transactions", "find-hanging", *b, "--topic", "nope", *now)
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    code, _, err = _run(capsys, "transactions", "find-hanging", *b, "--broker-id", "1",
                        "--partition", "0")  # fmt: skip
    assert code == 1 and "--partition needs --topic" in err
