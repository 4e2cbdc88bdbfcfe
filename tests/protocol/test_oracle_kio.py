"""Every API and version against kio, an independent Kafka codec generated from Kafka's specs.

kio's entities are typed (error codes must be known, durations and timestamps in range), so the
samples here use small non-negative integers and known error codes. For each sample, kio reads
exactly our bytes and writes them back identically; we decode kio's bytes to the same value.
Combinations kio does not ship are skipped, naming the missing module.
"""

from __future__ import annotations

import importlib
import io

import pytest
from kio.serial import entity_reader, entity_writer

from .samples import all_cases, gen_module, parsed, sample

SEEDS = range(4)


def kio_class(name: str, version: int):
    api = gen_module().snake(name.removesuffix("Request").removesuffix("Response"))
    kind = "request" if name.endswith("Request") else "response"
    module_name = f"kio.schema.{api}.v{version}.{kind}"
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        pytest.skip(f"kio has no {module_name}")
    return getattr(module, name)


@pytest.mark.parametrize(("name", "version"), all_cases())
def test_kio_round_trips_our_bytes(name: str, version: int) -> None:
    kcls = kio_class(name, version)
    _, cls, _, _ = parsed(name)
    read, write = entity_reader(kcls), entity_writer(kcls)
    for seed in SEEDS:
        obj = sample(name, version, seed, tame=True)
        data = obj.encode(version)
        theirs, size = read(data, 0)
        assert size == len(data), f"{name} v{version} seed {seed}: kio read {size}/{len(data)}"
        out = io.BytesIO()
        write(out, theirs)
        assert out.getvalue() == data, f"{name} v{version} seed {seed}"
        assert cls.decode(out.getvalue(), version) == obj


def test_kio_sees_our_values() -> None:
    """Spot-check field values (kio renames some fields and wraps durations)."""
    from onceflow.protocol.messages.produce import ProduceRequest

    topic = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id="txn-1",
        acks=-1,
        timeout_ms=1500,
        topic_data=[
            topic(name="t", partition_data=[topic.PartitionProduceData(index=2, records=b"R")])
        ],
    )
    theirs, _ = entity_reader(kio_class("ProduceRequest", 9))(request.encode(9), 0)
    assert theirs.transactional_id == "txn-1"
    assert theirs.acks == -1
    assert theirs.timeout.total_seconds() == 1.5
    assert theirs.topic_data[0].name == "t"
    assert theirs.topic_data[0].partition_data[0].index == 2
    assert bytes(theirs.topic_data[0].partition_data[0].records) == b"R"
