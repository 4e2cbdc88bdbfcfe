"""The idempotent send path end to end against a scripted broker (tests/client/fake_broker.py):
retries keep order and sequences, lost responses do not duplicate, KIP-360 epoch bumps,
OUT_OF_ORDER_SEQUENCE_NUMBER fails the batch and those behind it."""

from __future__ import annotations

import pytest

from client.fake_broker import ProducerFakeBroker
from onceflow.client.errors import OutOfOrderSequenceError
from onceflow.client.producer import Producer
from onceflow.protocol.errors import ErrorCode

N = 400
TP = ("t", 0)


@pytest.fixture
def fake():
    broker = ProducerFakeBroker({"t": 2})
    yield broker
    broker.stop()


def producer(fake: ProducerFakeBroker, **extra) -> Producer:
    # tiny batches, no linger: many batches in flight per partition
    config = {
        "bootstrap.servers": fake.bootstrap,
        "batch.size": 200,
        "linger.ms": 0,
        "retry.backoff.ms": 10,
        **extra,
    }
    return Producer(config)


def send_all(p: Producer, n: int = N, partition: int = 0):
    futures = [p.send("t", b"%05d" % i, partition=partition) for i in range(n)]
    p.flush(30)
    return futures


def expected(n: int = N) -> list[bytes]:
    return [b"%05d" % i for i in range(n)]


def assert_contiguous_sequences(fake: ProducerFakeBroker, tp=TP) -> None:
    by_epoch: dict[tuple[int, int], int] = {}
    for pid, epoch, seq, count, _offset in fake.batches[tp]:
        assert seq == by_epoch.get((pid, epoch), 0), fake.batches[tp]
        by_epoch[(pid, epoch)] = seq + count


def test_idempotent_by_default_and_sequences_contiguous(fake) -> None:
    with producer(fake) as p:
        futures = send_all(p)
        assert p.producer_id == 1001 and p.producer_epoch == 0
    assert [f.result(0).offset for f in futures] == list(range(N))
    assert fake.log[TP] == expected()
    assert len(fake.batches[TP]) > 10
    assert_contiguous_sequences(fake)


@pytest.mark.parametrize(
    "fault",
    [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS],
)
def test_retriable_error_keeps_order(fake, fault) -> None:
    fake.inject[TP] = [None, None, fault]  # the third batch fails once, those behind see a gap
    with producer(fake) as p:
        futures = send_all(p)
    assert all(f.exception(0) is None for f in futures)
    assert fake.inject[TP] == []
    assert fake.attempts[TP] > len(fake.batches[TP])  # some batches were retried
    assert fake.log[TP] == expected()
    assert_contiguous_sequences(fake)


def test_lost_response_is_deduplicated(fake) -> None:
    fake.inject[TP] = ["lose-response", "lose-response"]
    with producer(fake) as p:
        futures = send_all(p)
    assert all(f.exception(0) is None for f in futures)
    assert fake.log[TP] == expected()  # no duplicates


def test_unknown_producer_id_bumps_epoch(fake) -> None:
    with producer(fake) as p:
        send_all(p, 50)
        fake.inject[TP] = [ErrorCode.UNKNOWN_PRODUCER_ID]
        futures = [p.send("t", b"%05d" % i, partition=0) for i in range(50, N)]
        p.flush(30)
        assert p.producer_epoch == 1
    assert all(f.exception(0) is None for f in futures)
    assert fake.init_requests == [(4, -1, -1), (4, 1001, 0)]
    assert fake.log[TP] == expected()
    assert_contiguous_sequences(fake)
    epochs = [epoch for _pid, epoch, _seq, _count, _offset in fake.batches[TP]]
    assert epochs == sorted(epochs) and epochs[-1] == 1


def test_out_of_order_sequence_fails_batch_and_followers(fake) -> None:
    with producer(fake, **{"max.in.flight.requests.per.connection": 1}) as p:
        send_all(p, 20)
        fake.inject[TP] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
        failed = p.send("t", b"doomed", partition=0)
        with pytest.raises(OutOfOrderSequenceError, match="out of order sequence number"):
            failed.result(10)
        # the producer recovers with a bumped epoch
        after = p.send("t", b"after", partition=0).result(10)
        assert p.producer_epoch == 1
    assert fake.log[TP] == expected(20) + [b"after"]
    assert after.offset == 20


def test_other_partitions_continue(fake) -> None:
    fake.inject[("t", 1)] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 3
    with producer(fake) as p:
        a = [p.send("t", b"%05d" % i, partition=0) for i in range(100)]
        b = [p.send("t", b"%05d" % i, partition=1) for i in range(100)]
        p.flush(30)
    assert all(f.exception(0) is None for f in a + b)
    assert fake.log[("t", 0)] == expected(100) == fake.log[("t", 1)]
