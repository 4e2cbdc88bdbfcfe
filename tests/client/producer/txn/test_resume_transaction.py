"""Two-phase commit with the onceflow client against a live broker (what the Spark sink uses):

- `Producer.resume_transaction(producer_id, epoch)` on a new producer commits or aborts a
  transaction another producer instance opened and left open; committing it again is
  harmless; a stale epoch is fenced; a resumed transaction takes no records;
- `AdminClient.list_consumer_group_offsets(require_stable=True)` waits while offsets of the
  group are pending in a transaction and then returns the committed (offset, metadata).
"""

from __future__ import annotations

import threading
import time

import pytest

from client.client_support import read_all, txn_producer
from client.helpers import create_topic
from onceflow.client.admin import AdminClient
from onceflow.client.errors import IllegalStateError, KafkaError, ProducerFencedError
from onceflow.client.offsets import OffsetAndMetadata
from onceflow.common import TopicPartition
from onceflow.spark.orders import end_offsets

TIMEOUT = 30


@pytest.fixture
def txn_broker(peer):
    """The broker (onceflow, Kafka TV2, Kafka TV1) with a fresh 2-partition topic."""
    create_topic(peer.bootstrap, peer.name("out"), 2)
    return peer


def _prepare(bootstrap: str, out: str, txn_id: str, values: list[bytes], group: str | None = None):
    """Open a transaction with `values` (and a group offset), flush, close without ending it;
    returns (producer id, epoch)."""
    producer = txn_producer(bootstrap, txn_id)
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.send(out, value, partition=i % 2)
    if group is not None:
        offsets = {(out, 0): OffsetAndMetadata(7, "batch 6")}
        producer.send_offsets_to_transaction(offsets, group, TIMEOUT)
    producer.flush(TIMEOUT)
    ids = producer.producer_id, producer.producer_epoch
    producer.close(timeout=0)
    return ids


def _resume(bootstrap: str, txn_id: str, ids: tuple[int, int]):
    producer = txn_producer(bootstrap, txn_id)
    producer.resume_transaction(*ids)
    return producer


def test_resumed_transaction_commits_and_a_second_commit_is_harmless(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.name("out")
    values = [b"v%d" % i for i in range(20)]
    ids = _prepare(bootstrap, out, txn_broker.name("two-phase"), values)
    assert read_all(bootstrap, out, 2, "read_committed", quiet_s=0.5) == []
    for _attempt in range(2):  # the second commit is a driver re-running commit()
        producer = _resume(bootstrap, txn_broker.name("two-phase"), ids)
        producer.commit_transaction(TIMEOUT)
        producer.close()
    got = read_all(bootstrap, out, 2, "read_committed", expect=20)
    assert sorted(r.value for r in got) == sorted(values)
    assert end_offsets(bootstrap, out, 2, True) == end_offsets(bootstrap, out, 2, False)


def test_resumed_transaction_aborts(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.name("out")
    ids = _prepare(bootstrap, out, txn_broker.name("two-phase-abort"), [b"x"] * 5)
    producer = _resume(bootstrap, txn_broker.name("two-phase-abort"), ids)
    producer.abort_transaction(TIMEOUT)
    producer.close()
    assert read_all(bootstrap, out, 2, "read_committed", quiet_s=0.5) == []
    assert end_offsets(bootstrap, out, 2, True) == end_offsets(bootstrap, out, 2, False)


def test_resume_with_a_stale_epoch_is_fenced(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.name("out")
    ids = _prepare(bootstrap, out, txn_broker.name("two-phase-fenced"), [b"zombie"] * 5)
    newer = txn_producer(bootstrap, txn_broker.name("two-phase-fenced"))
    newer.init_transactions(TIMEOUT)  # fences the epoch and aborts the open transaction
    newer.close()
    producer = _resume(bootstrap, txn_broker.name("two-phase-fenced"), ids)
    with pytest.raises((ProducerFencedError, KafkaError)):
        producer.commit_transaction(TIMEOUT)
    producer.close()
    assert read_all(bootstrap, out, 2, "read_committed", quiet_s=0.5) == []


def test_resumed_transaction_takes_no_records_and_needs_a_fresh_producer(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.name("out")
    producer = _resume(bootstrap, txn_broker.name("two-phase-misuse"), (1000, 0))
    with pytest.raises(IllegalStateError):
        producer.send(out, b"late", partition=0)
    with pytest.raises(IllegalStateError):
        producer.send_offsets_to_transaction({(out, 0): 1}, "g", TIMEOUT)
    producer.close()
    used = txn_producer(bootstrap, txn_broker.name("two-phase-misuse-2"))
    used.init_transactions(TIMEOUT)
    with pytest.raises(IllegalStateError):
        used.resume_transaction(used.producer_id, used.producer_epoch)
    used.close()
    invalid = txn_producer(bootstrap, txn_broker.name("two-phase-misuse-3"))
    with pytest.raises(ValueError):
        invalid.resume_transaction(-1, 0)
    invalid.close(timeout=0)  # left open, it retried the broker long after the test


def test_group_offsets_wait_for_a_pending_transaction(txn_broker):
    bootstrap, out = txn_broker.bootstrap, txn_broker.name("out")
    tp = TopicPartition(out, 0)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_consumer_group_offsets(txn_broker.name("marker-group"), [tp]) == {
            tp: None
        }
    ids = _prepare(
        bootstrap,
        out,
        txn_broker.name("two-phase-offsets"),
        [b"r"],
        group=txn_broker.name("marker-group"),
    )
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        with pytest.raises(KafkaError):  # UNSTABLE_OFFSET_COMMIT until the transaction ends
            admin.list_consumer_group_offsets(txn_broker.name("marker-group"), [tp], timeout=0.5)
        assert admin.list_consumer_group_offsets(
            txn_broker.name("marker-group"), [tp], require_stable=False
        ) == {tp: None}

        def commit_later() -> None:
            time.sleep(0.5)
            producer = _resume(bootstrap, txn_broker.name("two-phase-offsets"), ids)
            producer.commit_transaction(TIMEOUT)
            producer.close()

        thread = threading.Thread(target=commit_later)
        thread.start()
        try:
            got = admin.list_consumer_group_offsets(
                txn_broker.name("marker-group"), [tp], timeout=TIMEOUT
            )
        finally:
            thread.join()
    assert got == {tp: (7, "batch 6")}


def test_a_producer_that_only_resumes_can_resume_the_next_transaction(txn_broker):
    """What the Spark sink's driver does with the producer it keeps per transactional id:
    resume and commit one transaction, then the next one of the same id; a producer that
    wrote records itself still may not resume."""
    bootstrap, out = txn_broker.bootstrap, txn_broker.name("out")
    first = _prepare(bootstrap, out, txn_broker.name("two-phase-again"), [b"a1", b"a2"])
    committer = _resume(bootstrap, txn_broker.name("two-phase-again"), first)
    committer.commit_transaction(TIMEOUT)
    second = _prepare(bootstrap, out, txn_broker.name("two-phase-again"), [b"b1"])
    assert second[1] > first[1]  # the writer's InitProducerId bumped the epoch
    committer.resume_transaction(*second)
    committer.commit_transaction(TIMEOUT)
    committer.resume_transaction(*second)  # committing it again is harmless
    committer.commit_transaction(TIMEOUT)
    with pytest.raises(IllegalStateError):  # it never writes a transaction of its own
        committer.begin_transaction()
    with pytest.raises(ProducerFencedError):  # the first epoch is stale now
        committer.resume_transaction(*first)
        committer.commit_transaction(TIMEOUT)
    committer.close()
    got = read_all(bootstrap, out, 2, "read_committed", expect=3)
    assert sorted(r.value for r in got) == [b"a1", b"a2", b"b1"]


def test_handed_over_producer_is_reused_and_fences_the_epoch_it_handed_over(txn_broker):
    """The Spark sink keeps a task's producer for the next batch: after
    `hand_over_transaction` its next `init_transactions` takes a new epoch, so a late commit
    with the handed-over identity (a driver's retried EndTxn) cannot end the next
    transaction."""
    bootstrap, out, txn_id = txn_broker.bootstrap, txn_broker.name("out"), txn_broker.name("kept")
    producer = txn_producer(bootstrap, txn_id)
    first = [b"first-%d" % i for i in range(10)]
    second = [b"second-%d" % i for i in range(5)]
    handed: list[tuple[int, int]] = []
    try:
        for values in (first, second):
            producer.init_transactions(TIMEOUT)
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.send(out, value, partition=i % 2)
            producer.flush(TIMEOUT)
            handed.append((producer.producer_id, producer.producer_epoch))
            producer.hand_over_transaction()
            assert producer.producer_id == -1
            if values is first:
                committer = _resume(bootstrap, txn_id, handed[0])
                committer.commit_transaction(TIMEOUT)
                committer.close()
    finally:
        producer.close(timeout=0)
    assert handed[1] != handed[0]
    stale = _resume(bootstrap, txn_id, handed[0])
    with pytest.raises(KafkaError):
        stale.commit_transaction(TIMEOUT)
    stale.close(timeout=0)
    got = read_all(bootstrap, out, 2, "read_committed", expect=10, quiet_s=0.5)
    assert sorted(r.value for r in got) == sorted(first)
    committer = _resume(bootstrap, txn_id, handed[1])
    committer.commit_transaction(TIMEOUT)
    committer.close()
    got = read_all(bootstrap, out, 2, "read_committed", expect=15)
    assert sorted(r.value for r in got) == sorted(first + second)


def test_hand_over_needs_a_flushed_transaction_of_its_own(txn_broker):
    bootstrap, out, txn_id = txn_broker.bootstrap, txn_broker.name("out"), txn_broker.name("hand")
    producer = txn_producer(bootstrap, txn_id)
    try:
        with pytest.raises(IllegalStateError):  # no transaction yet
            producer.hand_over_transaction()
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send(out, b"queued", partition=0)
        with pytest.raises(IllegalStateError, match="flush first"):
            producer.hand_over_transaction()
        producer.abort_transaction(TIMEOUT)
    finally:
        producer.close(timeout=0)
    resumed = _resume(bootstrap, txn_id, (1, 0))
    with pytest.raises(IllegalStateError):  # a resumed transaction is not this producer's
        resumed.hand_over_transaction()
    resumed.close(timeout=0)
