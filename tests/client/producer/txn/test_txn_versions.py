"""The transactional producer speaks transaction version 1 only, as the message specs require.

Produce v12+ and TxnOffsetCommit v5+ tell a Kafka 4.x broker that the client uses transaction
version 2 (the broker adds partitions and offsets to the transaction itself, EndTxn v5 bumps
the epoch). The onceflow client adds them explicitly and ends with EndTxn <= v4, so inside a
transaction it must stay at Produce <= v11 and TxnOffsetCommit <= v4 even when the broker
offers more; an idempotent producer outside transactions uses the highest common version.
The proxy between client and broker records the versions actually sent.
"""

from __future__ import annotations

from client.client_support import txn_producer
from client.helpers import create_topic
from onceflow.client.offsets import ConsumerGroupMetadata
from onceflow.client.producer import Producer

PRODUCE, TXN_OFFSET_COMMIT, END_TXN = 0, 28, 26
TIMEOUT = 30


def test_transactional_producer_caps_produce_and_txn_offset_commit(proxied):
    proxy, _broker = proxied
    create_topic(proxy.address, "t", 1)
    producer = txn_producer(proxy.address, "tv1")
    try:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send("t", b"v", partition=0)
        producer.send_offsets_to_transaction({("t", 0): 1}, ConsumerGroupMetadata("g"), TIMEOUT)
        producer.commit_transaction(TIMEOUT)
    finally:
        producer.close(5)
    assert proxy.versions(PRODUCE) == {11}
    assert proxy.versions(TXN_OFFSET_COMMIT) == {4}
    assert proxy.versions(END_TXN) == {4}


def test_idempotent_producer_uses_the_highest_common_produce_version(proxied):
    proxy, _broker = proxied
    create_topic(proxy.address, "t", 1)
    with Producer({"bootstrap.servers": proxy.address}) as producer:
        producer.send("t", b"v", partition=0).get(TIMEOUT)
    assert proxy.versions(PRODUCE) == {12}  # the broker's maximum
