"""In-process handler calls for tests: a `BrokerState` on a temporary directory and a `call`
that goes through the wire encoding both ways (request encoded/decoded at the version, the
response encoded at the version and decoded back), as a connection would."""

from __future__ import annotations

import asyncio
import uuid

from support.prometheus import sample_lines

from onceflow.broker import dispatch
from onceflow.broker.config import BrokerConfig
from onceflow.broker.context import ANONYMOUS, RequestContext
from onceflow.broker.state import BrokerState
from onceflow.protocol import messages
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import RequestHeader, encode_request_frame
from onceflow.protocol.messages.api_versions import ApiVersionsRequest
from onceflow.protocol.messages.fetch import FetchRequest
from onceflow.protocol.messages.list_offsets import ListOffsetsRequest
from onceflow.protocol.messages.produce import ProduceRequest
from onceflow.records.batch import iter_batches
from onceflow.records.builder import BatchBuilder
from onceflow.records.record import decode_records

PRODUCE_VERSIONS = range(3, 13)
FETCH_VERSIONS = range(4, 17)


def open_state(data_dir, **overrides) -> BrokerState:
    """A BrokerState on `data_dir` with `overrides` (dotted keys) applied."""
    values = {"log.dirs": str(data_dir)}
    values.update(
        {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()}
    )
    return BrokerState.open(BrokerConfig(values))


async def call(
    state: BrokerState,
    api_key: int,
    version: int,
    request,
    *,
    raw: bool = False,
    principal: str = ANONYMOUS,
    peer: str = "test-peer",
):
    """Run the handler for `request` at `version`; returns the decoded response (or None).

    With `raw` the request object is passed as is (no encode/decode round trip); `principal`
    and `peer` are the caller's as the connection would set them."""
    api = dispatch.lookup(api_key, version)
    if api is None:
        raise ValueError(f"api {api_key} v{version} not served")
    if not raw:
        request = api.request_cls.decode(request.encode(version), version)
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="test"
    )
    ctx = RequestContext(state, peer, None, principal=principal)
    response = await api.handler(ctx, header, request)
    if response is None:
        return None
    return api.response_cls.decode(response.encode(version), version)


def make_batch(values, *, key_prefix: bytes | None = b"k", timestamp: int | None = None, **kwargs):
    """A v2 batch (bytearray) with one record per value; `kwargs` go to `BatchBuilder`."""
    builder = BatchBuilder(**kwargs)
    for i, value in enumerate(values):
        key = None if key_prefix is None else key_prefix + b"%d" % i
        builder.append(timestamp, key, value)
    return builder.build()


def decode_all(records) -> list:
    """Every record of a record set, as `(offset, key, value)`."""
    out = []
    for header, view in iter_batches(records):
        for record in decode_records(view):
            out.append((header.base_offset + record.offset_delta, record.key, record.value))
    return out


def request_class(api_key: int):
    return messages.REQUESTS[api_key]


def produce_request(topic, partitions: dict[int, object], acks=-1, timeout_ms=5000):
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=p, records=r)
                    for p, r in partitions.items()
                ],
            )
        ],
    )


def fetch_request(
    topic,
    offsets: dict[int, int],
    *,
    max_wait_ms=0,
    min_bytes=1,
    max_bytes=10**7,
    partition_max_bytes=10**6,
    session_id=0,
    session_epoch=-1,
    topic_id=None,
):
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic if topic_id is None else "",
                topic_id=topic_id or uuid.UUID(int=0),
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=p,
                        current_leader_epoch=-1,
                        fetch_offset=o,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def partition_results(response):
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def create(state, name="t", partitions=3, **configs):
    result = state.logs.create_topic(name, partitions, {k: str(v) for k, v in configs.items()})
    assert result.error == ErrorCode.NONE


def list_offsets_request(topic, timestamps: dict[int, int], isolation=0):
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1, timestamp=ts
                    )
                    for p, ts in timestamps.items()
                ],
            )
        ],
    )


def produce_partitions(
    state: BrokerState, topic: str, partitions: dict[int, object], version: int = 9, acks=-1
):
    """Produce `partitions` ({partition: records}) to `topic` through the handler; the
    partition responses by (topic, partition)."""
    request = produce_request(topic, partitions, acks=acks)
    return partition_results(asyncio.run(call(state, ApiKey.PRODUCE, version, request)))


def samples(body: str) -> dict[str, str]:
    """Prometheus text exposition -> {name{labels}: value}; asserts every line's syntax."""
    return dict(sample_lines(body, strict=True))


async def http(address, request: bytes) -> tuple[str, str]:
    """Send a raw HTTP request to `address` (a Listener); (response head, body)."""
    reader, writer = await asyncio.open_connection(address.host, address.port)
    writer.write(request)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = data.decode().partition("\r\n\r\n")
    return head, body


async def api_versions_over_tcp(address) -> None:
    """One ApiVersions request over a real connection (counted by the request metrics)."""
    reader, writer = await asyncio.open_connection(address.host, address.port)
    header = RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=7, client_id="m"
    )
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    writer.write(encode_request_frame(header, request))
    await writer.drain()
    size = int.from_bytes(await reader.readexactly(4), "big")
    await reader.readexactly(size)
    writer.close()


def offset_commit_request(group: str, topic: str, partition: int, offset: int):
    """A simple (generation -1) OffsetCommit of one partition's offset."""
    from onceflow.protocol.messages.offset_commit import OffsetCommitRequest

    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part = topic_cls.OffsetCommitRequestPartition(
        partition_index=partition, committed_offset=offset
    )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[topic_cls(name=topic, partitions=[part])],
    )


def run_broker_with_metrics(tmp_path, scenario, **overrides):
    """Start a `Broker` on free ports with the metrics listener, run `await scenario(broker)`,
    stop it; the scenario's result."""
    from onceflow.broker.server import Broker

    config = BrokerConfig({
        "log.dirs": str(tmp_path / "data"), "listeners": "127.0.0.1:0",
        "onceflow.metrics.listener": "127.0.0.1:0", **overrides,
    })  # fmt: skip

    async def main():
        broker = Broker(config)
        await broker.start()
        try:
            return await scenario(broker)
        finally:
            await broker.stop()

    return asyncio.run(main())
