"""Coordinator recovery: the broker dies right after PREPARE_COMMIT is durable.

The broker runs with the test hook `onceflow.test.crash.after.prepare=true`: when a
transaction's PREPARE_COMMIT reaches `__transaction_state` the process exits (status 137, as
after kill -9) before any COMMIT marker is written. Restarted without the hook, the coordinator
must find the transaction in PREPARE_COMMIT and finish it: a COMMIT marker on every partition
of the transaction, COMPLETE_COMMIT as the id's last state, the records visible to
read_committed consumers (no client looks the coordinator up after the restart, so the
restart alone must do it), and a retried EndTxn(commit) answered with success.
"""

from __future__ import annotations

import asyncio
import gc
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from interop.workload import create_topic

from onceflow.client.connection import BrokerConnection
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.state import TxnState
from onceflow.coordinator.txn.state_log import TransactionStateLog
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest
from onceflow.protocol.messages.end_txn import EndTxnRequest
from onceflow.records.batch import iter_batches
from onceflow.records.control import ControlRecordType, parse_control_record

PARTITIONS = 3
TXN_PARTITIONS = 3
CRASH_KEY = "onceflow.test.crash.after.prepare"


def read_committed_values(bootstrap, topic, expected, timeout=20.0):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "recovery-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def end_txn_retry(bootstrap: str, transactional_id: str) -> ErrorCode:
    """The producer's retried EndTxn(commit) after the restart, sent by hand: its producer id
    and epoch come from DescribeTransactions. A completed commit answers NONE."""
    with BrokerConnection.from_address(bootstrap) as conn:
        describe = conn.send(DescribeTransactionsRequest(transactional_ids=[transactional_id]))
        (state,) = describe.transaction_states
        assert (state.error_code, state.transaction_state) == (ErrorCode.NONE, "CompleteCommit")
        request = EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=state.producer_id,
            producer_epoch=state.producer_epoch,
            committed=True,
        )
        return ErrorCode(conn.send(request, version=3).error_code)


def inspect(data_dir, topic, transactional_id):
    """(control record types per partition, last state of the id) read from the stopped
    broker's data directory."""

    async def read():
        logs = LogManager([str(data_dir)], {})
        logs.start()
        try:
            markers = {}
            for partition in range(PARTITIONS):
                log = logs.get_log(topic, partition)
                result = log.read(0, 10**7)
                markers[partition] = [
                    parse_control_record(view).control_type
                    for header, view in iter_batches(result.records or b"")
                    if header.is_control
                ]
            state_log = TransactionStateLog(
                logs, TxnConfig(transaction_state_log_num_partitions=TXN_PARTITIONS)
            )
            last = None
            for partition in range(TXN_PARTITIONS):
                for tid, transit in state_log.read_partition(partition):
                    if tid == transactional_id:
                        last = transit
            return markers, last
        finally:
            await logs.shutdown()

    return asyncio.run(read())


def test_prepared_commit_is_completed_after_a_crash(broker_factory):
    broker = broker_factory(
        {
            "transaction.state.log.num.partitions": TXN_PARTITIONS,
            "offsets.topic.num.partitions": 3,
            CRASH_KEY: True,
        }
    )
    topic = "recover"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": "crashing",
            "transaction.timeout.ms": 60000,
            "reconnect.backoff.max.ms": 200,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    values = [b"recover-%d" % i for i in range(9)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % PARTITIONS)
    try:
        producer.commit_transaction(3)
        committed_before_crash = True
    except KafkaException as exc:
        committed_before_crash = False
        assert exc.args[0].retriable() and not exc.args[0].txn_requires_abort()
    assert not committed_before_crash
    assert broker.proc.wait(10) == 137  # the hook fired: PREPARE_COMMIT durable, no markers
    # nobody may look the coordinator up after the restart: the restart alone must finish it
    del producer
    gc.collect()

    broker.extra_config.pop(CRASH_KEY)
    broker.restart()
    assert sorted(read_committed_values(broker.bootstrap, topic, len(values))) == sorted(values)
    assert end_txn_retry(broker.bootstrap, "crashing") == ErrorCode.NONE
    broker.stop()

    markers, last = inspect(broker.data_dir, topic, "crashing")
    assert markers == {p: [ControlRecordType.COMMIT] for p in range(PARTITIONS)}
    assert last is not None and last.txn_state is TxnState.COMPLETE_COMMIT
    assert "completing 1 transaction(s)" in broker.log_text()
