"""WireConnection, the I/O-free protocol core: bytes in, events out.

Each test plays the broker by hand: it parses what `data_to_send()` returns with the broker's
own header parser and feeds back response frames built from the generated message classes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.client.errors import (
    BrokerResponseError,
    ClusterAuthorizationFailedError,
    IllegalStateError,
    UnsupportedVersionError,
)
from onceflow.client.net.wire import WireConnection, WireState
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import encode_response_header, parse_request_header
from onceflow.protocol.messages import REQUESTS, RESPONSES

OUR_API_VERSIONS_MAX = REQUESTS[ApiKey.API_VERSIONS].VALID_VERSIONS[1]
BROKER_VERSIONS = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 12)}


def _sent_requests(wire: WireConnection) -> list[tuple]:
    """Split what the core queued into frames: (header, decoded request) each."""
    data = b"".join(wire.data_to_send())
    out = []
    while data:
        (size,) = struct.unpack_from(">i", data)
        frame, data = data[4 : 4 + size], data[4 + size :]
        header, body_offset = parse_request_header(frame)
        request_cls = REQUESTS[header.request_api_key]
        out.append((header, request_cls.decode(frame[body_offset:], header.request_api_version)))
    return out


def _frame(correlation_id: int, body: bytes, *, flexible_header: bool) -> bytes:
    payload = encode_response_header(correlation_id, flexible_header) + body
    return struct.pack(">i", len(payload)) + payload


def _api_versions_answer(correlation_id, version, versions=None, error=ErrorCode.NONE) -> bytes:
    cls = RESPONSES[ApiKey.API_VERSIONS]
    entries = [
        cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
        for k, (lo, hi) in (versions or BROKER_VERSIONS).items()
    ]
    body = cls(error_code=error, api_keys=entries).encode(version)
    return _frame(correlation_id, body, flexible_header=False)  # always header v0


def _metadata_answer(correlation_id: int, version: int, cluster_id: str = "c") -> bytes:
    cls = RESPONSES[ApiKey.METADATA]
    body = cls(
        brokers=[cls.MetadataResponseBroker(node_id=1, host="h", port=9092)],
        cluster_id=cluster_id,
        controller_id=1,
        topics=[],
    ).encode(version)
    return _frame(correlation_id, body, flexible_header=cls.is_flexible(version))


def _ready(versions=None) -> WireConnection:
    wire = WireConnection("me")
    ((header, _),) = _sent_requests(wire)
    wire.receive_data(
        _api_versions_answer(header.correlation_id, header.request_api_version, versions)
    )
    assert wire.next_event() is None
    assert wire.state is WireState.READY
    return wire


def _metadata_request():
    return REQUESTS[ApiKey.METADATA](topics=[])


# ---------------------------------------------------------------------- handshake


def test_starts_with_api_versions_at_our_highest_version():
    wire = WireConnection("me")
    assert wire.state is WireState.NEGOTIATING and wire.handshaking
    ((header, request),) = _sent_requests(wire)
    assert header.request_api_key == ApiKey.API_VERSIONS
    assert header.request_api_version == OUR_API_VERSIONS_MAX
    assert (header.correlation_id, header.client_id, header.header_version) == (1, "me", 2)
    assert request.client_software_name == "onceflow"
    assert wire.data_to_send() == []  # handed out once


def test_api_versions_answer_with_a_v0_header_makes_it_ready():
    # ApiVersions v3+ is flexible, yet its response header is v0: no tagged-field byte after
    # the correlation id. Reading one would eat the error code's first byte.
    wire = _ready()
    assert wire.broker_versions == {int(k): v for k, v in BROKER_VERSIONS.items()}
    assert wire.api_version(ApiKey.METADATA) == 12
    assert wire.api_version(ApiKey.METADATA, max_version=5) == 5
    assert wire.supports(ApiKey.METADATA) and not wire.supports(ApiKey.PRODUCE)
    assert wire.in_flight == 0


def test_kip_511_fallback_retries_at_the_brokers_highest_version():
    wire = WireConnection()
    ((first, _),) = _sent_requests(wire)
    old_broker = {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 9)}
    # a broker that does not know our version answers UNSUPPORTED_VERSION in a v0 body
    refusal = _api_versions_answer(
        first.correlation_id, 0, old_broker, ErrorCode.UNSUPPORTED_VERSION
    )
    wire.receive_data(refusal)
    assert wire.next_event() is None
    assert wire.state is WireState.NEGOTIATING
    ((second, _),) = _sent_requests(wire)
    assert (second.request_api_version, second.header_version) == (2, 1)
    assert second.correlation_id == first.correlation_id + 1
    wire.receive_data(_api_versions_answer(second.correlation_id, 2, old_broker))
    assert wire.next_event() is None
    assert wire.ready and wire.broker_versions[ApiKey.METADATA] == (0, 9)


def test_kip_511_retry_goes_one_below_ours_when_the_broker_claims_more():
    wire = WireConnection()
    ((first, _),) = _sent_requests(wire)
    newer = {ApiKey.API_VERSIONS: (0, OUR_API_VERSIONS_MAX + 5)}
    wire.receive_data(
        _api_versions_answer(first.correlation_id, 0, newer, ErrorCode.UNSUPPORTED_VERSION)
    )
    wire.next_event()
    ((second, _),) = _sent_requests(wire)
    assert second.request_api_version == OUR_API_VERSIONS_MAX - 1


def test_a_second_refusal_fails_the_handshake():
    wire = WireConnection()
    refusal = ErrorCode.UNSUPPORTED_VERSION
    ((header, _),) = _sent_requests(wire)
    wire.receive_data(_api_versions_answer(header.correlation_id, 0, None, refusal))
    assert wire.next_event() is None
    ((header, _),) = _sent_requests(wire)
    wire.receive_data(_api_versions_answer(header.correlation_id, 0, None, refusal))
    with pytest.raises(UnsupportedVersionError, match="negotiation failed"):
        wire.next_event()
    assert wire.state is WireState.CLOSED and not wire.handshaking


def test_an_api_versions_error_closes_with_its_typed_error():
    wire = WireConnection()
    ((header, _),) = _sent_requests(wire)
    answer = _api_versions_answer(
        header.correlation_id, OUR_API_VERSIONS_MAX, error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    wire.receive_data(answer)
    with pytest.raises(ClusterAuthorizationFailedError, match="ApiVersions"):
        wire.next_event()
    assert wire.state is WireState.CLOSED


def test_nothing_else_may_be_sent_during_the_handshake():
    wire = WireConnection()
    with pytest.raises(IllegalStateError, match="NEGOTIATING"):
        wire.send_request(_metadata_request(), 1)


# ---------------------------------------------------------------------- requests


def test_requests_get_fresh_correlation_ids_and_header_versions_by_flexibility():
    wire = _ready()
    first = wire.send_request(_metadata_request(), 12)
    second = wire.send_request(_metadata_request(), 8)
    (h1, _), (h2, _) = _sent_requests(wire)
    assert (h1.correlation_id, h1.request_api_version, h1.header_version) == (first, 12, 2)
    assert (h2.correlation_id, h2.request_api_version, h2.header_version) == (second, 8, 1)
    assert second == first + 1 and wire.in_flight == 2


def test_a_version_neither_side_supports_raises_before_anything_is_queued():
    wire = _ready({ApiKey.API_VERSIONS: (0, 3)})
    with pytest.raises(UnsupportedVersionError, match="does not support METADATA"):
        wire.send_request(_metadata_request())
    assert wire.data_to_send() == [] and wire.in_flight == 0


def test_a_request_without_response_is_not_awaited():
    wire = _ready()
    wire.send_request(_metadata_request(), 12, expect_response=False)
    assert len(_sent_requests(wire)) == 1 and wire.in_flight == 0


# ---------------------------------------------------------------------- responses


def test_a_response_fed_one_byte_at_a_time():
    wire = _ready()
    correlation_id = wire.send_request(_metadata_request(), 12, context="ctx", deadline=5.0)
    assert wire.oldest_pending.deadline == 5.0
    data = _metadata_answer(correlation_id, 12, cluster_id="split")
    for i in range(len(data) - 1):
        wire.receive_data(data[i : i + 1])
        assert wire.next_event() is None
    wire.receive_data(data[-1:])
    event = wire.next_event()
    assert event.error is None and event.message.cluster_id == "split"
    assert (event.request.correlation_id, event.request.context) == (correlation_id, "ctx")
    assert wire.next_event() is None and wire.in_flight == 0


def test_two_responses_in_one_chunk_come_out_in_order():
    wire = _ready()
    first = wire.send_request(_metadata_request(), 12)  # flexible: response header v1
    second = wire.send_request(_metadata_request(), 5)  # response header v0
    wire.receive_data(_metadata_answer(first, 12, "one") + _metadata_answer(second, 5, "two"))
    events = [wire.next_event(), wire.next_event()]
    assert [e.message.cluster_id for e in events] == ["one", "two"]
    assert [e.request.correlation_id for e in events] == [first, second]
    assert wire.next_event() is None


@given(st.lists(st.integers(min_value=1, max_value=40), max_size=30))
def test_any_split_of_the_stream_gives_the_same_events(cuts):
    wire = _ready()
    ids = [wire.send_request(_metadata_request(), v) for v in (12, 5, 9)]
    data = b"".join(_metadata_answer(c, v, f"c{c}") for c, v in zip(ids, (12, 5, 9), strict=True))
    events, pos = [], 0
    for cut in [*cuts, len(data)]:
        wire.receive_data(data[pos : pos + cut])
        pos += cut
        while (event := wire.next_event()) is not None:
            events.append(event)
    assert [e.message.cluster_id for e in events] == [f"c{c}" for c in ids]


def test_a_correlation_id_out_of_order_closes_the_connection():
    wire = _ready()
    correlation_id = wire.send_request(_metadata_request(), 12, context="waiting")
    wire.receive_data(_metadata_answer(correlation_id + 1, 12))
    with pytest.raises(BrokerResponseError, match=f"expected {correlation_id}"):
        wire.next_event()
    assert wire.state is WireState.CLOSED
    assert [r.context for r in wire.close()] == ["waiting"]  # for the transport to fail
    assert wire.close() == []


def test_a_response_with_nothing_in_flight_closes_the_connection():
    wire = _ready()
    wire.receive_data(_metadata_answer(7, 12))
    with pytest.raises(BrokerResponseError, match="correlation id 7 .none in flight"):
        wire.next_event()
    assert wire.state is WireState.CLOSED


@pytest.mark.parametrize("size", [-1, 0, 3])
def test_a_frame_too_short_for_a_correlation_id_closes_the_connection(size):
    wire = _ready()
    wire.send_request(_metadata_request(), 12)
    wire.receive_data(struct.pack(">i", size) + b"\x00" * 8)
    with pytest.raises(BrokerResponseError, match=f"invalid response size {size}"):
        wire.next_event()
    assert wire.state is WireState.CLOSED


def test_an_undecodable_body_fails_only_its_request():
    wire = _ready()
    bad = wire.send_request(_metadata_request(), 12)
    good = wire.send_request(_metadata_request(), 12)
    wire.receive_data(_frame(bad, b"\x00\x01", flexible_header=True))
    wire.receive_data(_metadata_answer(good, 12, "fine"))
    event = wire.next_event()
    assert event.message is None and event.request.correlation_id == bad
    assert "cannot decode METADATA v12" in str(event.error)
    assert wire.next_event().message.cluster_id == "fine"
    assert wire.ready


def test_bytes_after_close_are_dropped_and_sending_is_refused():
    wire = _ready()
    wire.send_request(_metadata_request(), 12, context="lost")
    assert [r.context for r in wire.close()] == ["lost"]
    wire.receive_data(_metadata_answer(2, 12))
    assert wire.next_event() is None
    with pytest.raises(IllegalStateError, match="CLOSED"):
        wire.send_request(_metadata_request(), 12)
