"""Idempotent producers through a proxy that loses Produce responses.

The broker advertises the fault-injecting proxy (`support.proxy.KafkaProxy`), so every request
goes through it. The proxy cuts the client off after forwarding 5% of Produce requests
(seeded): each such request has taken effect on the broker, but the client never sees the
answer, reconnects and sends the same batches again.

- confluent-kafka with `enable.idempotence=true`: 100 000 numbered 1 KiB records to 3
  partitions arrive exactly once, in order, at consecutive offsets; the broker's
  `onceflow_produce_duplicate_batches_total` shows the retries were caught by the producer
  window (not merely avoided).
- The same run with `enable.idempotence=false` (retries on) writes duplicates: the proof the
  check above can fail.
- The same with onceflow's own `Producer` (idempotent by default).
"""

from __future__ import annotations

import re
import threading
import time
import urllib.request

import pytest
from interop.workload import (
    Consumed,
    check_exact_round_trip,
    consume_confluent,
    create_topic,
    produce_confluent,
    record_value,
)
from support.prometheus import parse_samples
from support.proxy import KafkaProxy

PRODUCE = 0
PARTITIONS = 3
RECORDS = 100_000
CUT_PROBABILITY = 0.05
SEED = 20261121
METRICS_CONFIG = {"onceflow.metrics.listener": "127.0.0.1:0"}
_METRICS_LINE = re.compile(r"metrics on http://([\d.]+:\d+)/metrics")

# small batches: many Produce requests, so 5% of them is a real number of cuts
IDEMPOTENT = {
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 64 * 1024,
    "message.timeout.ms": 120_000,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
}


@pytest.fixture
def proxied(broker_factory):
    """(proxy, broker): the broker advertises the proxy and serves /metrics."""
    with KafkaProxy() as proxy:
        broker = broker_factory(extra_config=METRICS_CONFIG, advertised_listener=proxy.address)
        proxy.set_upstream(broker.host, broker.port)
        yield proxy, broker


def scrape(broker) -> dict[str, float]:
    """The broker's /metrics samples (the address is in its log)."""
    found = _METRICS_LINE.findall(broker.log_text())
    if not found:
        raise AssertionError("the broker did not log its metrics address")
    with urllib.request.urlopen(f"http://{found[-1]}/metrics", timeout=10) as response:
        return parse_samples(response.read().decode())


def duplicates(consumed: Consumed) -> int:
    """Records read more than once, over all partitions."""
    return sum(
        len(pairs) - len({seq for _, seq in pairs}) for pairs in consumed.by_partition.values()
    )


def cut_produce_run(proxy, topic: str, config: dict) -> tuple[object, int]:
    """Produce RECORDS through the proxy while it cuts 5% of Produce requests."""
    create_topic(proxy.address, topic, PARTITIONS)
    proxy.cut_randomly(CUT_PROBABILITY, SEED, api_keys={PRODUCE})
    produced = produce_confluent(proxy.address, topic, range(RECORDS), PARTITIONS, config)
    proxy.pass_through()
    return produced, proxy.counts()[1].get(PRODUCE, 0)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_idempotent_confluent_producer_writes_each_record_once_despite_lost_responses(proxied):
    proxy, broker = proxied
    produced, cuts = cut_produce_run(proxy, "idem", IDEMPOTENT)
    assert produced.failed == []
    assert len(produced.acked) == RECORDS
    assert cuts >= 10, f"only {cuts} Produce requests were cut: the fault did not happen"

    consumed, _ = consume_confluent(proxy.address, "idem", PARTITIONS, None, timeout=120)
    assert check_exact_round_trip(consumed, RECORDS, PARTITIONS) == []
    # every acknowledged offset holds the acknowledged record
    stored = {(p, o): s for p, pairs in consumed.by_partition.items() for o, s in pairs}
    assert all(stored.get((p, o)) == s for p, o, s in produced.acked)
    metrics = scrape(broker)
    print(
        f"confluent idempotent: {cuts} Produce requests cut, "
        f"{metrics['onceflow_produce_duplicate_batches_total']:.0f} duplicate batches caught"
    )
    assert metrics["onceflow_produce_duplicate_batches_total"] > 0
    for p in range(PARTITIONS):
        labels = f'{{topic="idem",partition="{p}"}}'
        assert metrics["onceflow_partition_live_producer_ids" + labels] == 1
        assert metrics["onceflow_partition_last_stable_offset" + labels] == len(
            range(p, RECORDS, PARTITIONS)
        )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_without_idempotence_the_same_faults_write_duplicates(proxied):
    proxy, broker = proxied
    # retries bounded by message.timeout.ms only: a run of cuts must not exhaust them (with 10
    # retries a loaded machine saw 378 records fail with _TRANSPORT)
    config = {
        **IDEMPOTENT,
        "enable.idempotence": False,
        "retries": 1_000_000,
        "retry.backoff.ms": 20,
    }
    produced, cuts = cut_produce_run(proxy, "plain", config)
    assert produced.failed == []
    assert cuts >= 10
    consumed, _ = consume_confluent(proxy.address, "plain", PARTITIONS, None, timeout=120)
    assert consumed.bad_values == []
    print(f"confluent without idempotence: {cuts} cut, {duplicates(consumed)} records duplicated")
    assert duplicates(consumed) > 0, "no duplicates: the fault injection did not bite"
    assert check_exact_round_trip(consumed, RECORDS, PARTITIONS) != []
    assert scrape(broker)["onceflow_produce_duplicate_batches_total"] == 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_idempotent_onceflow_producer_writes_each_record_once_despite_lost_responses(proxied):
    from onceflow.client.producer import Producer

    proxy, broker = proxied
    create_topic(proxy.address, "own", PARTITIONS)
    proxy.cut_randomly(CUT_PROBABILITY, SEED, api_keys={PRODUCE})
    acked: list[tuple[int, int, int]] = []
    failed: list[tuple[int, str]] = []
    lock = threading.Lock()

    def report(seq):
        def on_delivery(error, metadata) -> None:
            with lock:
                if error is None:
                    acked.append((metadata.partition, metadata.offset, seq))
                else:
                    failed.append((seq, str(error)))

        return on_delivery

    producer = Producer(
        {
            "bootstrap.servers": proxy.address,
            "linger.ms": 5,
            "batch.size": 64 * 1024,
            "delivery.timeout.ms": 120_000,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
        }
    )
    started = time.monotonic()
    try:
        for seq in range(RECORDS):
            producer.send(
                "own", record_value(seq), partition=seq % PARTITIONS, on_delivery=report(seq)
            )
        producer.flush(180)
    finally:
        producer.close(30)
    proxy.pass_through()
    cuts = proxy.counts()[1].get(PRODUCE, 0)
    assert failed == []
    assert len(acked) == RECORDS, f"{len(acked)} acknowledged after {time.monotonic() - started}s"
    assert cuts >= 10

    consumed, _ = consume_confluent(proxy.address, "own", PARTITIONS, None, timeout=120)
    assert check_exact_round_trip(consumed, RECORDS, PARTITIONS) == []
    stored = {(p, o): s for p, pairs in consumed.by_partition.items() for o, s in pairs}
    assert all(stored.get((p, o)) == s for p, o, s in acked)
    caught = scrape(broker)["onceflow_produce_duplicate_batches_total"]
    print(
        f"onceflow idempotent: {cuts} Produce requests cut, {caught:.0f} duplicate batches caught"
    )
    assert caught > 0
