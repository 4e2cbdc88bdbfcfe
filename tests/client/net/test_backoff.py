"""Exponential retry backoff (KIP-580) and its users that need no I/O: the helper itself
(growth, cap, jitter bounds, initial above max, reset), then the metadata refresh schedule,
the accumulator's batch retries and the transaction manager's request retries, each failing
again and again and then succeeding.

The jitter is +/-20%: a wait after n consecutive failures (n >= 1) lies in
[0.8, 1.2] x initial x 2^(n-1), and never above the maximum."""

from __future__ import annotations

import random

import pytest

from client.producer.test_accumulator import make as make_accumulator
from onceflow.client.net.backoff import (
    ExponentialBackoff,
    FailureBackoff,
    reconnect_backoff,
    retry_backoff,
)
from onceflow.client.net.metadata import Cluster, Metadata
from onceflow.client.producer.accumulator import ProducerBatch
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.client.producer.txn.request import TxnRequestKind
from onceflow.protocol.errors import ErrorCode

TP = ("t", 0)


def bounds_ms(initial: float, maximum: float, failures: int) -> tuple[float, float]:
    """Where the wait after `failures` consecutive failures may fall (jitter included)."""
    base = min(initial * 2 ** (failures - 1), maximum)
    return 0.8 * base, min(1.2 * base, maximum)


def assert_within(wait_ms: float, initial: float, maximum: float, failures: int) -> None:
    low, high = bounds_ms(initial, maximum, failures)
    assert low - 1e-6 <= wait_ms <= high + 1e-6, (failures, wait_ms, (low, high))


def fixed(factor: float):
    """A random source that always draws `factor` (inside the range it is asked for)."""

    def uniform(low: float, high: float) -> float:
        assert low <= factor <= high
        return factor

    return uniform


# ---------------------------------------------------------------- the helper


def test_grows_by_two_per_attempt_up_to_the_maximum():
    backoff = ExponentialBackoff(100, 1000, uniform=fixed(1.0))
    assert [backoff.backoff_ms(n) for n in range(7)] == [100, 200, 400, 800, 1000, 1000, 1000]
    assert backoff.backoff_s(2) == pytest.approx(0.4)


def test_jitter_never_takes_the_wait_past_the_maximum():
    high = ExponentialBackoff(100, 1000, uniform=fixed(1.2))
    assert [round(high.backoff_ms(n)) for n in range(6)] == [120, 240, 480, 960, 1000, 1000]
    low = ExponentialBackoff(100, 1000, uniform=fixed(0.8))
    assert [round(low.backoff_ms(n)) for n in range(6)] == [80, 160, 320, 640, 800, 800]


def test_jitter_spreads_the_waits_within_twenty_percent():
    backoff = ExponentialBackoff(50, 5000, uniform=random.Random(580).uniform)
    for attempts in range(12):
        waits = [backoff.backoff_ms(attempts) for _ in range(200)]
        for wait in waits:
            assert_within(wait, 50, 5000, attempts + 1)
        if attempts < 7:  # below the cap: spread over the whole +/-20%
            assert len(set(waits)) > 150
            assert min(waits) < 0.85 * 50 * 2**attempts < 1.15 * 50 * 2**attempts < max(waits)
        else:  # at the cap: 80% to 100% of the maximum
            assert min(waits) < 0.85 * 5000 and max(waits) == 5000


def test_initial_above_maximum_means_a_constant_maximum_without_jitter():
    def never(low: float, high: float) -> float:
        raise AssertionError("a constant backoff draws no jitter")

    backoff = ExponentialBackoff(5000, 1000, uniform=never)
    assert {backoff.backoff_ms(n) for n in range(10)} == {1000}
    assert {ExponentialBackoff(300, 300, uniform=never).backoff_ms(n) for n in range(5)} == {300}
    assert {ExponentialBackoff(300, uniform=never).backoff_ms(n) for n in range(5)} == {300}


def test_zero_initial_backoff_stays_zero():
    assert {ExponentialBackoff(0, 1000).backoff_ms(n) for n in range(12)} == {0}


def test_bad_jitter_or_multiplier_is_refused():
    with pytest.raises(ValueError):
        ExponentialBackoff(100, 1000, jitter=1.5)
    with pytest.raises(ValueError):
        ExponentialBackoff(100, 1000, multiplier=1)


def test_failure_backoff_counts_per_key_and_resets_on_success():
    failures = FailureBackoff(ExponentialBackoff(100, 1000, uniform=fixed(1.0)))
    assert [failures.failed(1) for _ in range(5)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    assert failures.failed(2) == 0.1  # another node has its own count
    assert failures.failures(1) == 5
    failures.succeeded(1)
    assert failures.failures(1) == 0
    assert failures.failed(1) == 0.1
    assert failures.failed(2) == 0.2


def test_the_config_keys_feed_the_backoffs():
    config = {
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 400,
    }
    retry, reconnect = retry_backoff(config), reconnect_backoff(config)
    assert (retry.initial_ms, retry.max_ms) == (100, 1000)
    assert (reconnect.initial_ms, reconnect.max_ms) == (50, 400)


# ---------------------------------------------------------------- metadata refresh


def test_failed_metadata_refreshes_back_off_exponentially_until_one_works():
    metadata = Metadata(max_age_ms=300_000, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    metadata.update(Cluster(), 0.0)
    now = 10.0
    for failures in range(1, 8):
        metadata.failed_update(OSError("down"), now)
        metadata.request_update()
        assert_within(metadata.time_to_next_update(now) * 1000, 100, 1000, failures)
        now += 5
    metadata.update(Cluster(), now)
    metadata.failed_update(OSError("down again"), now)
    metadata.request_update()
    assert_within(metadata.time_to_next_update(now) * 1000, 100, 1000, 1)


# ---------------------------------------------------------------- producer batches


def test_a_batch_retried_again_and_again_waits_longer_each_time():
    acc, _wakeups = make_accumulator(retry_backoff_ms=100, retry_backoff_max_ms=1000)
    batch = ProducerBatch(TP, 0, 0)
    for failures in range(1, 8):
        acc.reenqueue(batch, now=1000)
        assert_within(batch.retry_at_ms - 1000, 100, 1000, failures)
        check = acc.ready(1000, lambda tp: 1)  # the sender is told to wait that long
        assert not check.nodes and check.next_delay_ms == batch.retry_at_ms - 1000
    fresh = ProducerBatch(("t", 1), 0, 0)  # a new batch starts again from retry.backoff.ms
    acc.reenqueue(fresh, now=1000)
    assert_within(fresh.retry_at_ms - 1000, 100, 1000, 1)


# ---------------------------------------------------------------- transaction requests


def _take(txn: TxnManager, now: float, kind: TxnRequestKind):
    request, delay = txn.next_request(now, False)
    assert request is not None and request.kind is kind, (request, delay)
    return request


def test_a_transactional_request_retried_again_and_again_waits_longer_each_time():
    txn = TxnManager("tid", 60_000, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    result = txn.begin_init()
    now = 1000.0
    coordinator = {"node_id": 0, "host": "127.0.0.1", "port": 9092}
    txn.on_response(_take(txn, now, TxnRequestKind.FIND_COORDINATOR), now, {None: 0}, **coordinator)
    for failures in range(1, 7):
        request = _take(txn, now, TxnRequestKind.INIT_PRODUCER_ID)
        txn.on_response(request, now, {None: int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)})
        waiting, delay = txn.next_request(now, False)
        assert waiting is None
        assert_within(delay * 1000, 100, 1000, failures)
        now += delay
    request = _take(txn, now, TxnRequestKind.INIT_PRODUCER_ID)
    txn.on_response(request, now, {None: 0}, producer_id=7, producer_epoch=0)
    result.wait(0)
    # the next request is a new one: its first retry waits retry.backoff.ms again
    txn.begin_transaction()
    txn.maybe_add_partition(TP)
    request = _take(txn, now, TxnRequestKind.ADD_PARTITIONS_TO_TXN)
    txn.on_response(request, now, {TP: int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)})
    _none, delay = txn.next_request(now, False)
    assert_within(delay * 1000, 100, 1000, 1)
