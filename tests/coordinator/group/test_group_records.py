"""__consumer_offsets record codecs: Kafka's byte layout, round trips, tombstones, versions."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from onceflow.common import TopicPartition
from onceflow.coordinator.group.offsets import CommittedOffset
from onceflow.coordinator.group.records import (
    GroupRecord,
    OffsetRecord,
    encode_group_metadata,
    encode_offset_commit,
    group_metadata_key,
    offset_commit_key,
    parse_record,
)
from onceflow.protocol.internal import GroupMetadataValue


def _str(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_offset_record_layout() -> None:
    key = offset_commit_key("grp", TopicPartition("t", 7))
    assert key == struct.pack(">h", 1) + _str("grp") + _str("t") + struct.pack(">i", 7)
    value = encode_offset_commit(CommittedOffset(42, 3, "md", 1000))
    assert value == struct.pack(">hqi", 3, 42, 3) + _str("md") + struct.pack(">q", 1000)
    expiring = encode_offset_commit(CommittedOffset(42, 3, "md", 1000, expire_timestamp=2000))
    assert expiring == struct.pack(">hq", 1, 42) + _str("md") + struct.pack(">qq", 1000, 2000)


def test_group_record_layout() -> None:
    assert group_metadata_key("grp") == struct.pack(">h", 2) + _str("grp")
    value = GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol="range", leader="m1",
        current_state_timestamp=99,
        members=[GroupMetadataValue.MemberMetadata(
            member_id="m1", group_instance_id=None, client_id="c", client_host="/h",
            rebalance_timeout=300, session_timeout=100, subscription=b"S", assignment=b"A",
        )],
    )  # fmt: skip
    member = (
        _str("m1") + struct.pack(">h", -1) + _str("c") + _str("/h")
        + struct.pack(">ii", 300, 100) + struct.pack(">i", 1) + b"S" + struct.pack(">i", 1) + b"A"
    )  # fmt: skip
    expected = (
        struct.pack(">h", 3) + _str("consumer") + struct.pack(">i", 4) + _str("range") + _str("m1")
        + struct.pack(">q", 99) + struct.pack(">i", 1) + member
    )  # fmt: skip
    assert encode_group_metadata(value) == expected


def test_version0_group_value_uses_session_timeout_as_rebalance_timeout() -> None:
    value = GroupMetadataValue(
        protocol_type="consumer", generation=1, protocol="range", leader="m",
        members=[GroupMetadataValue.MemberMetadata(
            member_id="m", client_id="c", client_host="h", rebalance_timeout=0,
            session_timeout=123, subscription=b"", assignment=b"",
        )],
    )  # fmt: skip
    record = parse_record(group_metadata_key("g"), struct.pack(">h", 0) + value.encode(0), 5)
    assert isinstance(record, GroupRecord) and record.value.members[0].rebalance_timeout == 123


def test_tombstones_and_unknown_key_versions() -> None:
    tp = TopicPartition("t", 0)
    assert parse_record(offset_commit_key("g", tp), None, 1) == OffsetRecord("g", tp, None)
    assert parse_record(group_metadata_key("g"), None, 1) == GroupRecord("g", None)
    # key version 0 is read like 1
    key0 = struct.pack(">h", 0) + _str("g") + _str("t") + struct.pack(">i", 0)
    assert parse_record(key0, None, 1) == OffsetRecord("g", tp, None)
    # newer record kinds (KIP-848 consumer groups) are skipped
    assert parse_record(struct.pack(">h", 5) + _str("g"), b"\x00\x00", 1) is None


@given(
    group=st.text(max_size=20),
    topic=st.text(min_size=1, max_size=20),
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(-1, 2**63 - 1),
    leader_epoch=st.integers(-1, 2**31 - 1),
    metadata=st.text(max_size=50),
    commit_ts=st.integers(0, 2**62),
    expire_ts=st.one_of(st.just(-1), st.integers(0, 2**62)),
    record_offset=st.integers(0, 2**40),
)
def test_offset_record_round_trip(
    group, topic, partition, offset, leader_epoch, metadata, commit_ts, expire_ts, record_offset
) -> None:
    tp = TopicPartition(topic, partition)
    value = CommittedOffset(offset, leader_epoch, metadata, commit_ts, expire_ts)
    parsed = parse_record(offset_commit_key(group, tp), encode_offset_commit(value), record_offset)
    expected_epoch = -1 if expire_ts >= 0 else leader_epoch  # v1 has no leader epoch
    assert parsed == OffsetRecord(
        group,
        tp,
        CommittedOffset(
            offset, expected_epoch, metadata, commit_ts, expire_ts, record_offset
        ),  # fmt: skip
    )
