"""Request/response headers and framing, checked against kafka-python's header encoding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.protocol import messages
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.headers import (
    RequestHeader,
    encode_request_frame,
    encode_response_frame,
    encode_response_header,
    frame,
    parse_frame_size,
    parse_request_header,
    request_header_version,
    response_header_version,
)
from onceflow.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from onceflow.protocol.messages.produce import ProduceResponse

from .test_oracle_kafka_python import kafka_python_classes


def test_header_versions_follow_flexible_versions() -> None:
    assert request_header_version(ApiKey.PRODUCE, 8) == 1
    assert request_header_version(ApiKey.PRODUCE, 9) == 2
    assert response_header_version(ApiKey.PRODUCE, 8) == 0
    assert response_header_version(ApiKey.PRODUCE, 9) == 1
    assert request_header_version(ApiKey.OFFSET_DELETE, 0) == 1  # never flexible


def test_api_versions_response_header_is_always_v0() -> None:
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    for version in range(0, 10):  # including versions newer than we know
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0


def test_controlled_shutdown_v0_and_unknown_keys() -> None:
    assert request_header_version(7, 0) == 0
    assert request_header_version(7, 1) == 1
    assert request_header_version(9999, 3) == 1


@given(
    api_key=st.sampled_from(sorted(messages.REQUESTS)),
    version=st.integers(0, 20),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=50),
)
def test_request_header_round_trip(api_key, version, correlation_id, client_id) -> None:
    header = RequestHeader(
        request_api_key=api_key,
        request_api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    data = header.encode() + b"body"
    parsed, offset = parse_request_header(data)
    assert parsed == header
    assert data[offset:] == b"body"


def test_request_header_v2_skips_unknown_tagged_fields_and_never_compacts_client_id() -> None:
    data = b"\x00\x00\x00\x09\x00\x00\x00\x2a" + b"\x00\x03abc" + b"\x01\x05\x02zz" + b"BODY"
    header, offset = parse_request_header(data)
    assert (header.request_api_key, header.request_api_version) == (0, 9)
    assert (header.correlation_id, header.client_id, header.header_version) == (42, "abc", 2)
    assert data[offset:] == b"BODY"


def test_null_client_id() -> None:
    data = b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff"
    header, offset = parse_request_header(data)
    assert header.client_id is None and offset == len(data)


def test_truncated_headers_raise_decode_error() -> None:
    data = RequestHeader(
        request_api_key=0, request_api_version=9, correlation_id=1, client_id="client"
    ).encode()
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            parse_request_header(data[:cut])


def test_response_header_encoding() -> None:
    assert encode_response_header(7, flexible=False) == b"\x00\x00\x00\x07"
    assert encode_response_header(7, flexible=True) == b"\x00\x00\x00\x07\x00"


def test_frames() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert parse_frame_size(b"\x00\x00\x01\x00") == 256
    with pytest.raises(DecodeError):
        parse_frame_size(b"\x00\x00")
    with pytest.raises(DecodeError):
        parse_frame_size(b"\xff\xff\xff\xff")


def test_response_frame_keeps_records_uncopied() -> None:
    records = memoryview(b"x" * 1000)
    from onceflow.protocol.messages.fetch import FetchResponse

    topic = FetchResponse.FetchableTopicResponse
    response = FetchResponse(
        responses=[topic(topic="t", partitions=[topic.PartitionData(records=records)])]
    )
    parts = encode_response_frame(5, ApiKey.FETCH, 12, response)
    assert any(part is records for part in parts)
    data = b"".join(parts)
    assert parse_frame_size(data) == len(data) - 4
    assert data[4:9] == b"\x00\x00\x00\x05\x00"
    assert FetchResponse.decode(data[9:], 12) == response


def _versions(cls) -> list[int]:
    lo, hi = cls.VALID_VERSIONS
    return sorted({lo, hi, cls.FLEXIBLE_MIN or lo, max(lo, (cls.FLEXIBLE_MIN or lo) - 1)})


@pytest.mark.parametrize("api_key", sorted(messages.REQUESTS))
def test_frames_match_kafka_python(api_key: int) -> None:
    request_cls, response_cls = messages.REQUESTS[api_key], messages.RESPONSES[api_key]
    k_request = kafka_python_classes()[request_cls.__name__]
    k_response = kafka_python_classes()[response_cls.__name__]
    # kafka-python patches ListOffsetsRequest.ReplicaId's default to -1; the spec has none (0)
    fields = {"replica_id": -1} if api_key == ApiKey.LIST_OFFSETS else {}
    for version in _versions(request_cls):
        theirs = k_request(version=version, **fields)
        theirs.with_header(correlation_id=99, client_id="onceflow")
        header = RequestHeader(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=99,
            client_id="onceflow",
        )
        ours = encode_request_frame(header, request_cls(**fields))
        assert bytes(theirs.encode(header=True, framed=True)) == ours, version
        theirs_response = k_response(version=version)
        theirs_response.with_header(correlation_id=99)
        ours_response = b"".join(encode_response_frame(99, api_key, version, response_cls()))
        assert bytes(theirs_response.encode(header=True, framed=True)) == ours_response, version


def test_api_versions_exchange() -> None:
    header = RequestHeader(
        request_api_key=ApiKey.API_VERSIONS, request_api_version=3, correlation_id=1
    )
    request = ApiVersionsRequest(client_software_name="x", client_software_version="1")
    data = encode_request_frame(header, request)
    size = parse_frame_size(data)
    parsed, offset = parse_request_header(memoryview(data)[4 : 4 + size])
    assert parsed.header_version == 2
    assert ApiVersionsRequest.decode(memoryview(data)[4 + offset :], 3) == request
    key = ApiVersionsResponse.ApiVersion(api_key=0, min_version=3, max_version=13)
    response = ApiVersionsResponse(api_keys=[key])
    out = b"".join(encode_response_frame(1, ApiKey.API_VERSIONS, 3, response))
    assert out[4:8] == b"\x00\x00\x00\x01"  # header v0: no tagged-field byte
    assert ApiVersionsResponse.decode(out[8:], 3) == response
    assert ProduceResponse.is_flexible(9) and not ProduceResponse.is_flexible(8)
