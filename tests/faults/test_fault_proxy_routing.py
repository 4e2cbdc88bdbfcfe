"""Clients behind the fault-injecting proxy, with the broker advertising the proxy's address.

- Metadata (even when asked of the broker directly) names the proxy, so a client that
  bootstraps through the proxy sends every Produce and Fetch through it.
- The classic duplicate: the proxy forwards one Produce request and cuts the client off before
  the response; librdkafka (idempotence off) retries it and the batch is written twice. The
  test shows the duplicates are exactly one batch's worth, in one partition, and nothing else
  is duplicated or lost — the failure that idempotent producers (next issue) exist to prevent.
"""

from __future__ import annotations

from interop.workload import (
    Consumed,
    check_exact_round_trip,
    consume_confluent,
    create_topic,
    produce_confluent,
)

PRODUCE, FETCH, METADATA = 0, 1, 3
PARTITIONS = 3


def test_metadata_names_the_proxy_and_all_traffic_goes_through_it(proxied):
    from confluent_kafka.admin import AdminClient

    proxy, broker = proxied
    direct = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert [f"{b.host}:{b.port}" for b in direct.brokers.values()] == [proxy.address]

    n = 6_000
    create_topic(proxy.address, "routed", PARTITIONS)
    seen_before, _ = proxy.counts()
    produced = produce_confluent(proxy.address, "routed", range(n), PARTITIONS)
    assert produced.failed == []
    consumed, _ = consume_confluent(proxy.address, "routed", PARTITIONS, n, timeout=60)
    assert check_exact_round_trip(consumed, n, PARTITIONS) == []

    seen, cut = proxy.counts()
    assert cut == {}
    assert seen.get(PRODUCE, 0) > seen_before.get(PRODUCE, 0)
    assert seen.get(FETCH, 0) > 0
    assert seen.get(METADATA, 0) > 0
    assert proxy.stats.connections >= 2


def _duplicates(consumed: Consumed) -> dict[int, list[int]]:
    """Per partition, the sequence numbers that appear more than once."""
    dupes = {}
    for partition, pairs in consumed.by_partition.items():
        seqs = [s for _, s in pairs]
        extra = sorted({s for s in seqs if seqs.count(s) > 1})
        if extra:
            dupes[partition] = extra
    return dupes


def test_cut_produce_response_makes_a_retrying_producer_write_one_batch_twice(proxied):
    proxy, _broker = proxied
    topic = "cut"
    create_topic(proxy.address, topic, PARTITIONS)
    proxy.cut_nth(PRODUCE, 3)
    n = 3_000
    produced = produce_confluent(
        proxy.address,
        topic,
        range(n),
        PARTITIONS,
        {
            "enable.idempotence": False,
            "retries": 5,
            "retry.backoff.ms": 50,
            "max.in.flight.requests.per.connection": 1,
            "linger.ms": 20,
        },
    )
    assert produced.failed == []  # the retry succeeded: the producer saw no error
    assert proxy.counts()[1] == {PRODUCE: 1}

    consumed, _ = consume_confluent(proxy.address, topic, PARTITIONS, None, timeout=60)
    assert consumed.bad_values == []
    dupes = _duplicates(consumed)
    # the cut request's records were written twice ...
    assert dupes, "the cut Produce request was not duplicated by the retry"
    # ... and only those: one run of one partition's records, each exactly twice
    assert len(dupes) == 1, f"duplicates in several partitions: {dupes}"
    (partition, seqs) = next(iter(dupes.items()))
    assert seqs == list(range(seqs[0], seqs[-1] + PARTITIONS, PARTITIONS))
    pairs = consumed.by_partition[partition]
    assert sum(1 for _, s in pairs if s in set(seqs)) == 2 * len(seqs)
    # nothing was lost
    everything = {s for ps in consumed.by_partition.values() for _, s in ps}
    assert everything == set(range(n))
