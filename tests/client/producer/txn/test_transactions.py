"""The onceflow transactional producer against a live broker: onceflow's, and Apache Kafka with
transaction version 2 and 1 (the client speaks version 1; these tests are the proof that its
requests keep every guarantee on a version-2 cluster).

- committed records are visible to read_committed consumers (ours and confluent-kafka's),
  aborted ones are not (while read_uncommitted sees both);
- zombie fencing: a second producer with the same transactional.id fences the first, whose
  next transactional call raises `ProducerFencedError` (fatal), and the transaction the
  first left open is aborted by the second's init_transactions;
- send_offsets_to_transaction with the consumer's group metadata: offsets become the group's
  committed offsets when the transaction commits, never when it aborts;
- calls out of order raise `IllegalStateError`; a commit with a batch that cannot be
  delivered leaves the transaction abortable, and abort_transaction recovers.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from support.peers import Peer

from client.client_support import (
    confluent_read_all,
    group_consumer,
    poll_until,
    produce,
    read_all,
    txn_producer,
)
from client.helpers import create_topic
from onceflow.client.errors import (
    IllegalStateError,
    ProducerFencedError,
    TransactionAbortableError,
)

PARTITIONS = 3
TIMEOUT = 30


@dataclass
class TxnSetup:
    peer: Peer
    out: str  # a fresh topic of PARTITIONS partitions

    @property
    def bootstrap(self) -> str:
        return self.peer.bootstrap


@pytest.fixture
def txn_broker(peer):
    setup = TxnSetup(peer, peer.name("out"))
    create_topic(peer.bootstrap, setup.out, PARTITIONS)
    return setup


def send_all(producer, values, topic):
    for i, value in enumerate(values):
        producer.send(topic, value, partition=i % PARTITIONS)


def test_commit_is_visible_and_abort_is_hidden(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.out
    committed = [b"c%03d" % i for i in range(60)]
    aborted = [b"a%03d" % i for i in range(40)]
    sentinel = [b"s%03d" % i for i in range(PARTITIONS)]
    with txn_producer(bootstrap, txn_broker.peer.name("txn-visibility")) as producer:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        send_all(producer, committed, out)
        producer.commit_transaction(TIMEOUT)
        producer.begin_transaction()
        send_all(producer, aborted, out)
        producer.flush(TIMEOUT)  # the aborted records really reach the log
        producer.abort_transaction(TIMEOUT)
        producer.begin_transaction()
        send_all(producer, sentinel, out)
        producer.commit_transaction(TIMEOUT)

    expected = sorted(committed + sentinel)
    ours = read_all(bootstrap, out, PARTITIONS, "read_committed", expect=len(expected))
    assert sorted(r.value for r in ours) == expected
    theirs = confluent_read_all(bootstrap, out, PARTITIONS, "read_committed", len(expected))
    assert sorted(theirs) == expected
    everything = read_all(bootstrap, out, PARTITIONS, "read_uncommitted", expect=len(expected) + 40)
    assert sorted(r.value for r in everything) == sorted(expected + aborted)


def test_second_producer_fences_the_first(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.out
    txn_id = txn_broker.peer.name("zombie")
    first = txn_producer(bootstrap, txn_id)
    second = txn_producer(bootstrap, txn_id)
    try:
        first.init_transactions(TIMEOUT)
        first.begin_transaction()
        send_all(first, [b"zombie-%d" % i for i in range(9)], out)
        first.flush(TIMEOUT)  # written, never committed
        second.init_transactions(TIMEOUT)  # fences `first` and aborts its transaction
        assert second.producer_id == first.producer_id
        assert second.producer_epoch > first.producer_epoch
        with pytest.raises(ProducerFencedError) as info:
            first.commit_transaction(TIMEOUT)
        assert info.value.fatal
        with pytest.raises(ProducerFencedError):
            first.begin_transaction()
        second.begin_transaction()
        send_all(second, [b"live-%d" % i for i in range(PARTITIONS)], out)
        second.commit_transaction(TIMEOUT)
    finally:
        first.close(5)
        second.close(5)
    values = read_all(bootstrap, out, PARTITIONS, "read_committed", expect=PARTITIONS)
    assert sorted(r.value for r in values) == [b"live-%d" % i for i in range(PARTITIONS)]


def test_offsets_sent_to_the_transaction_commit_with_it(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.out
    topic_in = txn_broker.peer.name("in")
    create_topic(bootstrap, topic_in, PARTITIONS)
    produce(bootstrap, topic_in, [b"in-%d" % i for i in range(30)], PARTITIONS)
    consumer = group_consumer(
        bootstrap, txn_broker.peer.name("txn-group"), **{"isolation.level": "read_committed"}
    )
    producer = txn_producer(bootstrap, txn_broker.peer.name("txn-offsets"))
    try:
        consumer.subscribe([topic_in])
        records = []
        poll_until([consumer], lambda: len(records) >= 30, lambda c, r: records.append(r))
        positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
        assert sum(positions.values()) == 30
        producer.init_transactions(TIMEOUT)

        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            {tp: 1 for tp in positions}, consumer.consumer_group_metadata(), TIMEOUT
        )
        producer.abort_transaction(TIMEOUT)
        assert set(consumer.committed(positions).values()) == {None}

        producer.begin_transaction()
        send_all(producer, [r.value.upper() for r in records], out)
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), TIMEOUT)
        producer.commit_transaction(TIMEOUT)
        committed = consumer.committed(positions, timeout=TIMEOUT)
        assert {tp: c.offset for tp, c in committed.items()} == positions
    finally:
        consumer.close()
        producer.close(5)


def test_calls_out_of_order_and_abortable_recovery(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.out
    with txn_producer(
        bootstrap,
        txn_broker.peer.name("txn-order"),
        **{"delivery.timeout.ms": 2000, "request.timeout.ms": 1500, "linger.ms": 0},
    ) as producer:
        with pytest.raises(IllegalStateError):
            producer.begin_transaction()
        producer.init_transactions(TIMEOUT)
        with pytest.raises(IllegalStateError):
            producer.send(out, b"outside a transaction", partition=0)
        with pytest.raises(IllegalStateError):
            producer.commit_transaction(TIMEOUT)
        producer.begin_transaction()
        producer.send(out, b"ok", partition=0).result(TIMEOUT)
        producer.send(out, b"ok", partition=1).result(TIMEOUT)  # both in the transaction
        txn_broker.peer.pause()  # the next batch cannot be delivered within delivery.timeout.ms
        try:
            future = producer.send(out, b"lost", partition=1)
            with pytest.raises(TransactionAbortableError) as info:
                producer.commit_transaction(TIMEOUT)
            assert info.value.txn_requires_abort and not info.value.fatal
        finally:
            txn_broker.peer.resume()
        assert future.exception(TIMEOUT) is not None
        with pytest.raises(TransactionAbortableError):
            producer.send(out, b"still doomed", partition=0)
        producer.abort_transaction(TIMEOUT)
        producer.begin_transaction()
        producer.send(out, b"after", partition=2)
        producer.commit_transaction(TIMEOUT)
    values = read_all(bootstrap, out, PARTITIONS, "read_committed", expect=1)
    assert [r.value for r in values] == [b"after"]


def test_transaction_timeout_aborts_and_fences_the_producer(txn_broker):
    """A producer that stays in a transaction past transaction.timeout.ms: the coordinator
    aborts the transaction (committed records of others behind it become readable, its own
    never do) and fences its epoch, so its late commit fails."""
    bootstrap, out = txn_broker.bootstrap, txn_broker.out
    slow = txn_producer(bootstrap, txn_broker.peer.name("slow"), **{"transaction.timeout.ms": 2000})
    try:
        slow.init_transactions(TIMEOUT)
        slow.begin_transaction()
        send_all(slow, [b"slow-%d" % i for i in range(6)], out)
        slow.flush(TIMEOUT)  # in the log, pinning the last stable offset
        with txn_producer(bootstrap, txn_broker.peer.name("fast")) as fast:
            fast.init_transactions(TIMEOUT)
            fast.begin_transaction()
            send_all(fast, [b"fast-%d" % i for i in range(PARTITIONS)], out)
            fast.commit_transaction(TIMEOUT)
        # readable only once the coordinator aborted the slow transaction (timeout 2 s)
        got = read_all(bootstrap, out, PARTITIONS, "read_committed", expect=PARTITIONS)
        assert sorted(r.value for r in got) == [b"fast-%d" % i for i in range(PARTITIONS)]
        with pytest.raises(ProducerFencedError):  # the abort bumped the epoch
            slow.commit_transaction(TIMEOUT)
    finally:
        slow.close(5)
    everything = read_all(bootstrap, out, PARTITIONS, "read_committed", quiet_s=1.0)
    assert sorted(r.value for r in everything) == [b"fast-%d" % i for i in range(PARTITIONS)]
