"""`onceflow transactions list|describe|describe-producers|abort` against a live broker.

A deliberately hung transaction: a transactional batch produced without a transactional id
(so no coordinator tracks it, and Produce does not verify it) pins the last stable offset of
its partition. The CLI finds it with describe-producers and aborts it by start offset; the
partition's last stable offset then moves past it. A live confluent-kafka transaction shows up
in list and describe. A broker without `onceflow.admin.allow.write.txn.markers` refuses the
abort.

The same commands on a 3-node Apache Kafka cluster (transaction version 2), where the
coordinator and the partitions' leaders are other brokers than the bootstrap one: an open
transaction over three partitions is listed, described, found not hanging, and aborted
partition by partition.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from interop.workload import create_topic
from support.hung_txn import HUNG_PRODUCER_ID, hang_a_transaction, last_stable_offset
from support.peers import FAST_GROUP_BROKER, KAFKA_TV2, ONCEFLOW

from onceflow.cli.main import main
from onceflow.client.admin import AdminClient, NewTopic, OffsetSpec
from onceflow.client.producer import Producer as OnceflowProducer
from onceflow.common import TopicPartition


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


@pytest.fixture(params=[ONCEFLOW, pytest.param(KAFKA_TV2, marks=pytest.mark.kafka)])
def cluster(request, broker_factory) -> tuple[str, int]:
    """(bootstrap, replication factor): a onceflow broker, or a shared 3-node Kafka cluster."""
    if request.param == ONCEFLOW:
        return broker_factory(FAST_GROUP_BROKER).bootstrap, 1
    return request.getfixturevalue("kafka_clusters").get(3, 2).bootstrap, 3


def _stable_and_end(admin: AdminClient, tps: list[TopicPartition]) -> dict[int, tuple[int, int]]:
    committed = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()), isolation_level=1)
    latest = admin.list_offsets(dict.fromkeys(tps, OffsetSpec.latest()))
    return {tp.partition: (committed[tp].offset, latest[tp].offset) for tp in tps}


def test_commands_reach_the_coordinator_and_the_leaders(cluster, capsys):
    bootstrap, replicas = cluster
    b = ("--bootstrap-server", bootstrap)
    suffix = f"{os.getpid()}-{time.monotonic_ns()}"
    topic, tid = f"cli-txn-{suffix}", f"cli-tid-{suffix}"
    tps = [TopicPartition(topic, p) for p in range(3)]
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 3, replicas)])[topic].raise_for_error()
        producer = OnceflowProducer({"bootstrap.servers": bootstrap, "transactional.id": tid})
        try:
            producer.init_transactions(60)
            for tp in tps:  # offset 0: a record outside the transaction
                producer.begin_transaction()
                producer.send(topic, b"before", partition=tp.partition)
                producer.commit_transaction(60)
            producer.begin_transaction()
            for tp in tps:
                producer.send(topic, b"open", partition=tp.partition)
            producer.flush(60)

            code, out, err = _run(capsys, "transactions", "list", *b, "--state", "Ongoing")
            assert (code, err) == (0, ""), err
            (listed,) = [r for r in _rows(out) if r["TransactionalId"] == tid]
            code, out, err = _run(capsys, "transactions", "describe", *b, "--transactional-id", tid)
            assert (code, err) == (0, ""), err
            (described,) = _rows(out)
            assert described["CoordinatorId"] == listed["CoordinatorId"] != "-1"
            assert described["TopicPartitions"] == ",".join(f"{topic}-{p}" for p in range(3))
            assert described["ProducerId"] == listed["ProducerId"] == str(producer.producer_id)

            for tp in tps:  # each partition at its own leader
                code, out, err = _run(
                    capsys, "transactions", "describe-producers", *b, "--topic", topic,
                    "--partition", str(tp.partition),
                )  # fmt: skip
                assert (code, err) == (0, ""), err
                starts = {r["ProducerId"]: r["CurrentTransactionStartOffset"] for r in _rows(out)}
                assert starts[str(producer.producer_id)] == "2"  # after the record and marker

            now = ("--max-transaction-timeout", "0")
            code, out, err = _run(
                capsys, "transactions", "find-hanging", *b, "--topic", topic, *now
            )
            assert (code, err, _rows(out)) == (0, "", [])  # its coordinator will end it

            assert {s for s, _ in _stable_and_end(admin, tps).values()} == {2}
            for tp in tps:
                code, out, err = _run(
                    capsys, "transactions", "abort", *b, "--topic", topic,
                    "--partition", str(tp.partition), "--start-offset", "2",
                )  # fmt: skip
                assert (code, err) == (0, ""), err
            deadline = time.monotonic() + 30
            while any(s != e for s, e in _stable_and_end(admin, tps).values()):
                assert time.monotonic() < deadline, _stable_and_end(admin, tps)
                time.sleep(0.1)
        finally:
            producer.close(timeout=0)
