"""Producer ids bound to principals survive kill -9 (issue 10 item 6).

A broker process with a PLAINTEXT listener (setup, lookups as User:ANONYMOUS) and a
SASL_PLAINTEXT one with SCRAM users alice and bob. Alice's confluent-kafka transactional
producer opens a transaction; the broker is killed with SIGKILL and restarted; bob logs in and
sends crafted EndTxn, AddPartitionsToTxn and Produce requests with alice's producer id and
epoch: each is TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Alice's producer then carries on and
commits, and a read_committed consumer sees exactly her records. Then a torn owner record is
appended to the file (a crash in the middle of an append), the broker is killed and restarted:
it drops the torn record (one warning), starts, and still refuses bob.
"""

from __future__ import annotations

import asyncio
import socket
import time
from types import SimpleNamespace

import pytest
from broker.broker_helpers import make_batch, partition_results, produce_request
from confluent_kafka import Consumer, Producer, TopicPartition
from interop.workload import create_topic
from security.live import RawClient
from security.test_sasl_broker import login
from support.broker import BrokerProcess
from support.sasl_broker import scram_config

from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest
from onceflow.protocol.messages.end_txn import EndTxnRequest
from onceflow.security.producer_id_owners import FILE_NAME, encode_record

pytestmark = pytest.mark.timeout(180)

MECHANISM = "SCRAM-SHA-512"
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
USERS = ";".join(f"{MECHANISM}=[name={u},password={p}]" for u, p in PASSWORDS.items())
TOPIC = "bound"
TXN_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir) -> BrokerProcess:
    """Fixed ports, so alice's producer finds the broker again after the restart."""
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(
        data_dir,
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "onceflow.sasl.bootstrap.users": USERS,
            "num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            "offsets.topic.num.partitions": 1,
        },
    )
    broker.sasl_bootstrap = f"127.0.0.1:{sasl}"
    broker.sasl_address = SimpleNamespace(host="127.0.0.1", port=sasl)
    broker.plain_address = SimpleNamespace(host="127.0.0.1", port=plain)
    return broker


async def alices_ids(broker) -> tuple[int, int]:
    client = await RawClient.connect(broker.plain_address)
    try:
        request = DescribeTransactionsRequest(transactional_ids=["tx"])
        response = await client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, request)
    finally:
        await client.close()
    state = response.transaction_states[0]
    assert state.error_code == 0 and state.transaction_state == "Ongoing"
    return state.producer_id, state.producer_epoch


async def bobs_answers(broker, pid: int, epoch: int) -> dict[str, object]:
    client = await RawClient.connect(broker.sasl_address)
    try:
        assert (await login(client, MECHANISM, "bob", PASSWORDS["bob"])).error_code == 0
        end = EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True
        )
        answers = {"EndTxn": (await client.request(ApiKey.END_TXN, 3, end)).error_code}
        add = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])
            ],
        )
        response = await client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
        answers["AddPartitionsToTxn"] = (
            response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        )
        batch = make_batch(
            [b"bob"], producer_id=pid, producer_epoch=epoch, base_sequence=5, is_transactional=True
        )
        request = produce_request(TOPIC, {0: batch})
        request.transactional_id = "tx"
        response = await client.request(ApiKey.PRODUCE, 9, request)
        answers["Produce"] = partition_results(response)[(TOPIC, 0)].error_code
        return answers
    finally:
        await client.close()


BOB_REFUSED = {"EndTxn": TXN_FAILED, "AddPartitionsToTxn": TXN_FAILED, "Produce": TXN_FAILED}


def read_committed(bootstrap: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "binding-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
        # a little longer: anything injected would show up after alice's records
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_bindings_survive_kill_9_and_a_torn_record_is_dropped(tmp_path):
    broker = start_broker(tmp_path / "data")
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        alice = Producer(
            {
                **scram_config(broker, MECHANISM, "alice", PASSWORDS["alice"]),
                "transactional.id": "tx",
            }
        )
        alice.init_transactions(30)
        alice.begin_transaction()
        alice.produce(TOPIC, b"alice-1")
        assert alice.flush(30) == 0
        pid, epoch = asyncio.run(alices_ids(broker))

        broker.restart(kill=True)
        assert asyncio.run(bobs_answers(broker, pid, epoch)) == BOB_REFUSED
        alice.produce(TOPIC, b"alice-2")
        assert alice.flush(30) == 0
        alice.commit_transaction(30)
        assert read_committed(broker.bootstrap, 2) == [b"alice-1", b"alice-2"]

        owners = broker.data_dir / FILE_NAME
        whole = owners.read_bytes()
        assert whole  # alice's binding (bob was never bound to anything)
        broker.kill()
        with open(owners, "ab") as f:
            f.write(encode_record(pid + 1, "User:bob")[:-3])
        broker.start()
        assert "dropped a torn last record" in broker.log_text()
        assert owners.read_bytes() == whole
        assert asyncio.run(bobs_answers(broker, pid, epoch)) == BOB_REFUSED
    finally:
        broker.stop()
