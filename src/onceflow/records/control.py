"""Control records: the COMMIT/ABORT transaction markers written by the transaction coordinator.

A control batch has the transactional and control attribute bits set, one record, base
sequence -1, and the producer id and epoch of the transaction it ends. Its record's key is
``int16 version (0), int16 type`` and, for markers, its value is ``int16 version (0), int32
coordinator epoch`` (Kafka's `ControlRecordType` and `EndTransactionMarker`).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from onceflow.common import BytesLike
from onceflow.records.batch import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, parse_header
from onceflow.records.builder import BatchBuilder
from onceflow.records.errors import CorruptRecordError
from onceflow.records.record import decode_records

__all__ = [
    "ControlRecord",
    "ControlRecordType",
    "build_control_batch",
    "encode_control_key",
    "encode_marker_value",
    "parse_control_record",
]

CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0
_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """Type field of a control record key (Kafka's `ControlRecordType`)."""

    ABORT = 0
    COMMIT = 1


class ControlRecord(NamedTuple):
    """A parsed control record. `control_type` is a raw int when Kafka's type is not a marker;
    `coordinator_epoch` is None then."""

    version: int
    control_type: int
    coordinator_epoch: int | None


def encode_control_key(control_type: int) -> bytes:
    """The 4-byte key of a control record of `control_type`."""
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def encode_marker_value(coordinator_epoch: int) -> bytes:
    """The 6-byte value of a COMMIT/ABORT marker."""
    return _MARKER_VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    control_type: ControlRecordType,
    coordinator_epoch: int,
    timestamp_ms: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytearray:
    """A one-record COMMIT or ABORT marker batch (base offset 0, uncompressed, CRC set)."""
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        timestamp_ms,
        encode_control_key(ControlRecordType(control_type)),
        encode_marker_value(coordinator_epoch),
    )
    return builder.build()


def parse_control_record(batch: BytesLike) -> ControlRecord:
    """Parse the control record of a control batch; raises CorruptRecordError if malformed.

    Like Kafka, a key or value version above 0 is read as version 0 (the fields it knows come
    first), and a negative key version is rejected.
    """
    header = parse_header(batch)
    if not header.is_control:
        raise CorruptRecordError("not a control batch")
    records = decode_records(batch)
    if len(records) != 1:
        raise CorruptRecordError(f"control batch holds {len(records)} records, expected 1")
    key, value = records[0].key, records[0].value
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError("control record key is missing or shorter than 4 bytes")
    version, control_type = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record key version {version}")
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return ControlRecord(version, control_type, None)
    if value is None or len(value) < _MARKER_VALUE.size:
        raise CorruptRecordError("transaction marker value is missing or shorter than 6 bytes")
    value_version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    if value_version < 0:
        raise CorruptRecordError(f"invalid transaction marker value version {value_version}")
    return ControlRecord(version, ControlRecordType(control_type), coordinator_epoch)
