"""The generated message classes on their own: round trips, tagged fields, bad input, registries."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onceflow.protocol import messages
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError, UnsupportedVersionError, encode_uvarint
from onceflow.protocol.messages.fetch import FetchRequest, FetchResponse
from onceflow.protocol.messages.produce import ProduceRequest, ProduceResponse

from .samples import ROOT, all_cases, message_specs, parsed, sample

CASES = all_cases()


@pytest.mark.parametrize(("name", "version"), CASES)
def test_round_trip_every_version(name: str, version: int) -> None:
    _, cls, _, _ = parsed(name)
    for seed in range(3):
        obj = sample(name, version, seed)
        data = obj.encode(version)
        decoded, end = cls.decode_from(data, version)
        assert end == len(data)
        assert decoded == obj
        assert decoded.encode(version) == data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), seed=st.integers(0, 2**32))
def test_round_trip_random_samples(case: tuple[str, int], seed: int) -> None:
    name, version = case
    obj = sample(name, version, seed)
    data = obj.encode(version)
    assert type(obj).decode(data, version) == obj


@pytest.mark.parametrize(("name", "version"), CASES)
def test_every_truncation_raises_decode_error(name: str, version: int) -> None:
    _, cls, _, _ = parsed(name)
    data = sample(name, version, 7).encode(version)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            cls.decode(data[:cut], version)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(CASES), seed=st.integers(0, 2**32), data=st.data())
def test_corrupted_input_only_raises_decode_error(case, seed, data) -> None:
    name, version = case
    _, cls, _, _ = parsed(name)
    encoded = bytearray(sample(name, version, seed).encode(version))
    if not encoded:
        return
    for _ in range(data.draw(st.integers(1, 4))):
        encoded[data.draw(st.integers(0, len(encoded) - 1))] = data.draw(st.integers(0, 255))
    try:
        cls.decode(bytes(encoded), version)
    except DecodeError:
        pass


def _flexible_cases() -> list[tuple[str, int]]:
    return [(n, v) for n, v in CASES if parsed(n)[1].is_flexible(v)]


@pytest.mark.parametrize(("name", "version"), _flexible_cases())
def test_unknown_top_level_tagged_fields_are_skipped(name: str, version: int) -> None:
    _, cls, _, _ = parsed(name)
    obj = cls()  # every tagged field at its default: the encoding ends with an empty section
    data = obj.encode(version)
    assert data.endswith(b"\x00")
    unknown = encode_uvarint(2) + b"\x0a\x03abc" + encode_uvarint(300) + b"\x01\xff"
    assert cls.decode(data[:-1] + unknown, version) == obj


def test_unknown_tagged_fields_skipped_in_nested_struct_next_to_known_ones() -> None:
    partition = FetchRequest.FetchTopic.FetchPartition
    directory = uuid.UUID(int=0x1234)

    def request(**tags):
        topic = FetchRequest.FetchTopic(partitions=[partition(partition=3, **tags)])
        return FetchRequest(topics=[topic])

    plain = request().encode(18)
    tagged = request(replica_directory_id=directory, high_watermark=77).encode(18)
    start = next(i for i, (x, y) in enumerate(zip(plain, tagged, strict=False)) if x != y)
    assert plain[start] == 0  # the partition's empty tagged section
    # tags out of order, with an unknown tag 5 between the known tags 1 and 0
    section = (
        b"\x03"
        + b"\x01\x08"
        + (77).to_bytes(8, "big")
        + b"\x05\x02??"
        + b"\x00\x10"
        + directory.bytes
    )
    spliced = plain[:start] + section + plain[start + 1 :]
    expected = request(replica_directory_id=directory, high_watermark=77)
    assert FetchRequest.decode(spliced, 18) == expected


def test_known_tagged_field_decoded_among_unknown_ones() -> None:
    data = ProduceResponse(throttle_time_ms=5).encode(10)
    endpoint = ProduceResponse.NodeEndpoint(node_id=1, host="h", port=9092, rack=None)
    with_endpoint = ProduceResponse(throttle_time_ms=5, node_endpoints=[endpoint]).encode(10)
    section = with_endpoint[len(data) - 1 :]
    assert section[0] == 1  # one tagged field: NodeEndpoints, tag 0
    spliced = data[:-1] + b"\x02" + section[1:] + b"\x05\x01!"  # plus unknown tag 5
    decoded = ProduceResponse.decode(spliced, 10)
    assert decoded.node_endpoints == [endpoint]
    assert decoded.throttle_time_ms == 5


def test_tagged_field_written_only_when_not_default() -> None:
    partition = FetchResponse.FetchableTopicResponse.PartitionData
    default = partition(partition_index=1)
    moved = partition(partition_index=1, current_leader=partition.LeaderIdAndEpoch(leader_id=4))
    plain = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[default])])
    tagged = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[moved])])
    assert len(tagged.encode(12)) > len(plain.encode(12))
    assert FetchResponse.decode(tagged.encode(12), 12) == tagged
    assert FetchResponse.decode(plain.encode(12), 12).responses[0].partitions[0] == default


def test_records_are_zero_copy() -> None:
    records = bytes(range(256)) * 64
    topic = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        acks=-1,
        topic_data=[topic(name="t", partition_data=[topic.PartitionProduceData(records=records)])],
    )
    frame = request.encode(9)
    decoded = ProduceRequest.decode(frame, 9)
    view = decoded.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview)
    assert view.obj is frame
    assert view == records
    # a record set given as a memoryview is passed through, not copied, on encode
    parts = decoded.encode_parts(9)
    assert any(part is view for part in parts)
    assert b"".join(parts) == frame


def test_non_ignorable_field_absent_in_version_refuses_non_default() -> None:
    with pytest.raises(UnsupportedVersionError, match="replica_id"):
        FetchRequest(replica_id=5).encode(15)  # ReplicaId exists only in v0-14
    assert FetchRequest(replica_id=-1).encode(15) == FetchRequest().encode(15)


def test_ignorable_field_absent_in_version_is_dropped() -> None:
    topic = ProduceRequest.TopicProduceData(name="named")  # Name is v0-12 and ignorable
    data = ProduceRequest(topic_data=[topic]).encode(13)
    assert ProduceRequest.decode(data, 13).topic_data[0].name == ""


def test_unsupported_versions() -> None:
    low, high = ProduceRequest.VALID_VERSIONS
    with pytest.raises(DecodeError):
        ProduceRequest.decode(b"", high + 1)
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest().encode(low - 1)


def test_non_nullable_null_is_a_decode_error() -> None:
    # ProduceRequest v3 topic_data is a non-nullable int32-length array: -1 is invalid
    data = ProduceRequest().encode(3)
    assert data.endswith(b"\x00\x00\x00\x00")
    with pytest.raises(DecodeError, match="non-nullable"):
        ProduceRequest.decode(data[:-4] + b"\xff\xff\xff\xff", 3)


def test_equality_and_repr() -> None:
    a = ProduceResponse(throttle_time_ms=1)
    assert a == ProduceResponse(throttle_time_ms=1)
    assert a != ProduceResponse(throttle_time_ms=2)
    assert a != FetchResponse()
    assert "throttle_time_ms=1" in repr(a)
    topic = ProduceRequest.TopicProduceData
    req = ProduceRequest.decode(
        ProduceRequest(
            topic_data=[topic(partition_data=[topic.PartitionProduceData(records=b"xyz")])]
        ).encode(9),
        9,
    )
    assert "memoryview of 3 bytes" in repr(req)
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(AttributeError):
        a.not_a_field = 1


def test_defaults_follow_the_specs() -> None:
    request = FetchRequest()
    assert request.max_bytes == 0x7FFFFFFF
    assert request.session_epoch == -1
    assert request.cluster_id is None
    assert request.rack_id == ""
    assert request.replica_state == FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
    assert request.topics == [] and request.topics is not FetchRequest().topics


def test_registries_match_the_specs() -> None:
    specs = message_specs()
    assert set(messages.REQUESTS) == set(messages.RESPONSES)
    for key, req in messages.REQUESTS.items():
        resp = messages.RESPONSES[key]
        assert req.API_KEY == resp.API_KEY == key
        assert ApiKey(key).name.lower() == req.__module__.rsplit(".", 1)[1]
        for cls in (req, resp):
            spec = specs[cls.__name__]
            assert spec["apiKey"] == key
            lo, hi = cls.VALID_VERSIONS
            assert set(cls._DECODERS) == set(cls._ENCODERS) == set(range(lo, hi + 1))
            flexible = spec["flexibleVersions"]
            assert cls.FLEXIBLE_MIN == (None if flexible == "none" else int(flexible[:-1]))
    assert len(messages.REQUESTS) == len({s["apiKey"] for s in specs.values()})


def test_api_key_names_match_kio() -> None:
    from kio.schema.index import api_key_map

    for key in ApiKey:
        assert api_key_map[key.value].upper() == key.name


def test_generator_output_is_deterministic_and_current() -> None:
    check = [sys.executable, str(ROOT / "tools" / "gen_messages.py"), "--check"]
    result = subprocess.run(check, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def _shapes(obj, sd, version: int, flexible: bool, depth: int, found: set[str]) -> None:
    default = type(obj)()
    for fd in sd.fields:
        if version not in fd.versions:
            continue
        value = getattr(obj, fd.attr)
        if value is None:
            found.add("null")
        if flexible and version in fd.tagged and value != getattr(default, fd.attr):
            found.add("tagged" if depth == 0 else "nested tagged")
        if fd.struct is not None and value is not None:
            items = value if fd.is_array else [value]
            if fd.is_array and items and depth >= 1:
                found.add("nested array")
            for item in items:
                _shapes(item, fd.struct, version, flexible, depth + 1, found)


def test_samples_cover_nulls_arrays_and_tags() -> None:
    """The sample builder really produces the shapes the oracle tests rely on."""
    counts = {"null": 0, "tagged": 0, "nested tagged": 0, "nested array": 0}
    for name, version in CASES:
        sd, cls, _, _ = parsed(name)
        for seed in range(3):
            found: set[str] = set()
            _shapes(sample(name, version, seed), sd, version, cls.is_flexible(version), 0, found)
            for shape in found:
                counts[shape] += 1
    assert all(count >= 20 for count in counts.values()), counts


def test_out_of_range_value_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="ProduceResponse v9"):
        ProduceResponse(throttle_time_ms=2**31).encode(9)
