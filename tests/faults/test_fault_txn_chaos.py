"""Chaos for transactions over the wire: connections killed under real clients (issue 8,
defect 3).

Several transactional producers (the onceflow client, and confluent-kafka's) run short
transactions - records, offsets through AddOffsetsToTxn/TxnOffsetCommit, commit or abort -
against a broker behind a proxy that kills the client's connection right after forwarding a
random share of InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn
requests (the broker has acted; the client never hears). Clients react as applications do:
abort after an error, or close and start a new producer (which fences the old one). Then
every transactional id must end in EMPTY, CompleteCommit or CompleteAbort within the
transaction timeout (plus the abort timer's interval), none stuck answering
CONCURRENT_TRANSACTIONS.

The in-process half, which cancels every handler at every await point, is
tests/broker/test_broker_txn_chaos.py. `ONCEFLOW_CHAOS_SEED` picks another seed for repeated
local runs.
"""

from __future__ import annotations

import os
import random
import threading
import time

from confluent_kafka import KafkaException
from confluent_kafka import Producer as ConfluentProducer
from support.proxy import KafkaProxy

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.connection import connect_bootstrap
from onceflow.client.errors import KafkaError
from onceflow.client.producer import Producer
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest

TXN_TIMEOUT_MS = 3_000
ABORT_TIMER_MS = 500
BLOCK_S = 10.0
ROUNDS = 12
CUT_PROBABILITY = 0.2
SETTLED = {"Empty", "CompleteCommit", "CompleteAbort"}
TXN_APIS = [
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.END_TXN,
]
BROKER_CONFIG = {
    "transaction.state.log.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_TIMER_MS,
}


class _OnceflowClient:
    errors = (KafkaError,)

    def __init__(self, bootstrap: str, tid: str) -> None:
        self.tid = tid
        self.config = {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "max.block.ms": int(BLOCK_S * 1000),
            "linger.ms": 2,
        }

    def new(self):
        return Producer(self.config)

    def send(self, producer, value: bytes, partition: int) -> None:
        producer.send("chaos", value, partition=partition)

    def send_offsets(self, producer, offset: int) -> None:
        producer.send_offsets_to_transaction({("chaos", 0): offset}, f"g-{self.tid}", BLOCK_S)

    def drop(self, producer) -> None:
        producer.close(0)

    def close(self, producer) -> None:
        producer.close(BLOCK_S)


class _ConfluentClient(_OnceflowClient):
    errors = (KafkaException,)

    def __init__(self, bootstrap: str, tid: str) -> None:
        super().__init__(bootstrap, tid)
        self.config = {
            "bootstrap.servers": bootstrap,
            "transactional.id": tid,
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "linger.ms": 2,
            "log_level": 0,
        }

    def new(self):
        return ConfluentProducer(self.config)

    def send(self, producer, value: bytes, partition: int) -> None:
        producer.produce("chaos", value, partition=partition)

    def send_offsets(self, producer, offset: int) -> None:
        pass  # needs a live consumer's group metadata with confluent-kafka

    def drop(self, producer) -> None:
        pass  # dropped: the next producer with the id fences it

    def close(self, producer) -> None:
        producer.flush(BLOCK_S)


def _worker(client: _OnceflowClient, seed: int, errors: list) -> None:
    """Transactions as an application runs them: on an error abort, and if even that fails
    start a new producer (whose init fences the old one)."""
    rng = random.Random(seed)
    producer = None
    for round_ in range(ROUNDS):
        try:
            if producer is None:
                producer = client.new()
                producer.init_transactions(BLOCK_S)
            producer.begin_transaction()
            client.send(producer, b"%d" % round_, rng.randrange(2))
            if rng.random() < 0.5:
                client.send_offsets(producer, round_)
            if rng.random() < 0.7:
                producer.commit_transaction(BLOCK_S)
            else:
                producer.abort_transaction(BLOCK_S)
        except client.errors as exc:
            errors.append(f"{client.tid}: {exc}")
            try:
                producer.abort_transaction(BLOCK_S)
            except (*client.errors, AttributeError):
                if producer is not None:
                    client.drop(producer)
                producer = None
    if producer is not None:
        client.close(producer)


def _states(bootstrap: str, ids: list[str]) -> dict[str, str]:
    conn = connect_bootstrap(bootstrap)
    try:
        response = conn.send(DescribeTransactionsRequest(transactional_ids=ids))
    finally:
        conn.close()
    return {s.transactional_id: s.transaction_state for s in response.transaction_states}


def test_killed_connections_leave_every_transactional_id_settled(broker_factory):
    seed = int(os.environ.get("ONCEFLOW_CHAOS_SEED", "8"))
    with KafkaProxy() as proxy:
        broker = broker_factory(BROKER_CONFIG, advertised_listener=proxy.address)
        proxy.set_upstream(broker.host, broker.port)
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic("chaos", 2, 1)])["chaos"].raise_for_error()
        proxy.cut_randomly(CUT_PROBABILITY, seed, TXN_APIS)
        clients = [_OnceflowClient(proxy.address, f"chaos-onceflow-{i}") for i in range(3)]
        clients.append(_ConfluentClient(proxy.address, "chaos-confluent-0"))
        errors: list = []
        threads = [
            threading.Thread(target=_worker, args=(client, seed + i, errors))
            for i, client in enumerate(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(ROUNDS * 4 * BLOCK_S)
        assert not any(thread.is_alive() for thread in threads)
        _, cut = proxy.counts()
        assert sum(cut.values()) > 0, "the proxy killed no connection: nothing was tested"

    ids = [client.tid for client in clients]
    deadline = time.monotonic() + (TXN_TIMEOUT_MS + 2 * ABORT_TIMER_MS) / 1000 + 15
    states = _states(broker.bootstrap, ids)
    while set(states.values()) - SETTLED and time.monotonic() < deadline:
        time.sleep(0.2)
        states = _states(broker.bootstrap, ids)
    assert set(states) == set(ids)
    assert set(states.values()) <= SETTLED, (states, cut, errors)
    print(f"seed {seed}: cut {cut}, client errors {sorted(errors)}, states {states}")
