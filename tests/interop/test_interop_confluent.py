"""confluent-kafka (librdkafka) round trips through a live onceflow broker, per codec.

A producer with acks=all writes numbered 1 KiB records over 3 partitions; a consumer using
assign() (no group features) reads them back. Every record must come back exactly once, byte
for byte, in per-partition order at consecutive offsets: 100 000 records for every codec
(none, gzip, snappy, lz4, zstd). The delivery reports must also name consecutive offsets.
"""

from __future__ import annotations

import pytest

from interop.workload import (
    check_exact_round_trip,
    consume_confluent,
    create_topic,
    produce_confluent,
)

PARTITIONS = 3
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 100_000


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip(broker, codec):
    n = N
    topic = f"interop-{codec}"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    produced = produce_confluent(
        broker.bootstrap, topic, range(n), PARTITIONS, {"compression.type": codec}
    )
    assert produced.failed == []
    assert len(produced.acked) == n
    # delivery reports carry the offsets the broker assigned: consecutive per partition
    for partition in range(PARTITIONS):
        offsets = sorted(o for p, o, _ in produced.acked if p == partition)
        assert offsets == list(range(len(offsets)))

    consumed, seconds = consume_confluent(broker.bootstrap, topic, PARTITIONS, n, timeout=180)
    assert check_exact_round_trip(consumed, n, PARTITIONS) == []
    mb = n * 1024 / 1e6
    print(
        f"{codec}: {n} records, produce {mb / produced.seconds:.1f} MB/s, "
        f"consume {mb / seconds:.1f} MB/s"
    )


def test_metadata_names_the_broker_and_the_topic(broker):
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap, "meta", PARTITIONS)
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [(broker.host, broker.port)]
    assert sorted(metadata.topics["meta"].partitions) == [0, 1, 2]
    assert metadata.topics["meta"].error is None
