"""Golden bytes: Produce requests captured from real clients (see golden/capture_golden.py)
are parsed by the broker's connection-level path and appended by the Produce handler."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from broker.broker_helpers import decode_all
from onceflow.broker import dispatch
from onceflow.broker.context import RequestContext
from onceflow.log.validator import validate_batch
from onceflow.protocol.api_keys import ApiKey
from onceflow.records.batch import iter_batches

GOLDEN = Path(__file__).parent / "golden"
FILES = sorted(GOLDEN.glob("*_produce_v*.bin"))


def test_golden_files_present():
    names = {f.name.split("_produce")[0] for f in FILES}
    assert {"librdkafka", "kafka_python"} <= names


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_broker_parses_and_appends_real_client_produce(state, path):
    from onceflow.protocol.headers import parse_request_header

    frame = bytearray(path.read_bytes())
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, body_offset = parse_request_header(memoryview(frame)[4:])
    assert header.request_api_key == ApiKey.PRODUCE
    api = dispatch.lookup(header.request_api_key, header.request_api_version)
    assert api is not None, f"Produce v{header.request_api_version} is not served"
    request = api.request_cls.decode(
        memoryview(frame)[4 + body_offset :], header.request_api_version
    )
    assert request.acks == -1
    [topic] = request.topic_data
    [partition] = topic.partition_data
    assert topic.name == "golden" and partition.index == 0
    [(batch_header, batch)] = list(iter_batches(partition.records))
    assert validate_batch(batch_header, batch) is None
    assert batch_header.records_count == 3

    state.logs.create_topic("golden", 1)
    ctx = RequestContext(state, "golden", None)
    response = asyncio.run(api.handler(ctx, header, request))
    result = response.responses[0].partition_responses[0]
    assert (result.error_code, result.base_offset) == (0, 0)
    read = state.get_log("golden", 0).read(0, 1 << 20)
    assert decode_all(read.records) == [(i, b"k%d" % i, b"golden-%d" % i) for i in range(3)]
