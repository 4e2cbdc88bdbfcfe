"""The durable producer id -> principal map (`security.producer_id_owners`): records survive a
reopen, anonymous owners write nothing, a torn last record is dropped and cut off, a bad record
before the end refuses to open, superseded records are compacted away."""

from __future__ import annotations

import os

import pytest

from onceflow.security.producer_id_owners import (
    FILE_NAME,
    ProducerIdOwners,
    ProducerIdOwnersCorruptError,
    encode_record,
)

ALICE, BOB, ANONYMOUS = "User:alice", "User:bob", "User:ANONYMOUS"


def file_bytes(tmp_path) -> bytes:
    return (tmp_path / FILE_NAME).read_bytes()


def test_bindings_survive_a_reopen_and_unknown_ids_are_anonymous(tmp_path):
    owners = ProducerIdOwners(str(tmp_path))
    owners.bind(7, ALICE)
    owners.bind(8, "User:CN=Zoë Smith,O=acme")
    owners.bind(9, ALICE)
    reopened = ProducerIdOwners(str(tmp_path))
    assert reopened.owner(7) == ALICE
    assert reopened.owner(8) == "User:CN=Zoë Smith,O=acme"
    assert reopened.owner(9) == ALICE
    assert reopened.owner(10) == ANONYMOUS
    assert len(reopened) == 3


def test_anonymous_and_unchanged_owners_write_nothing(tmp_path):
    owners = ProducerIdOwners(str(tmp_path))
    owners.bind(1, ANONYMOUS)
    assert not (tmp_path / FILE_NAME).exists()
    owners.bind(2, ALICE)
    size = len(file_bytes(tmp_path))
    owners.bind(2, ALICE)  # an epoch bump by the same principal
    assert len(file_bytes(tmp_path)) == size
    owners.bind(2, ANONYMOUS)  # taken over by an unauthenticated client: recorded
    assert ProducerIdOwners(str(tmp_path)).owner(2) == ANONYMOUS


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(lambda record: record[:3], id="short-frame"),
        pytest.param(lambda record: record[:-2], id="short-payload"),
        pytest.param(lambda record: record[:-1] + b"\xff", id="bad-crc"),
        pytest.param(lambda record: bytes(len(record)), id="zero-filled"),
    ],
)
def test_a_torn_last_record_is_dropped_and_cut_off(tmp_path, tail):
    owners = ProducerIdOwners(str(tmp_path))
    owners.bind(1, ALICE)
    whole = file_bytes(tmp_path)
    with open(tmp_path / FILE_NAME, "ab") as f:
        f.write(tail(encode_record(2, BOB)))
    reopened = ProducerIdOwners(str(tmp_path))
    assert reopened.owner(1) == ALICE and reopened.owner(2) == ANONYMOUS
    assert reopened.torn_bytes > 0
    assert file_bytes(tmp_path) == whole
    reopened.bind(3, BOB)  # the next record follows the last whole one
    again = ProducerIdOwners(str(tmp_path))
    assert (again.owner(1), again.owner(3), again.torn_bytes) == (ALICE, BOB, 0)


def test_a_bad_record_before_the_end_refuses_to_open(tmp_path):
    owners = ProducerIdOwners(str(tmp_path))
    for pid in range(3):
        owners.bind(pid, ALICE)
    data = bytearray(file_bytes(tmp_path))
    data[12] ^= 0x01  # a payload byte of the first record
    (tmp_path / FILE_NAME).write_bytes(bytes(data))
    with pytest.raises(ProducerIdOwnersCorruptError):
        ProducerIdOwners(str(tmp_path))
    assert file_bytes(tmp_path) == bytes(data)  # left for the operator


def test_superseded_records_are_compacted_at_open(tmp_path):
    owners = ProducerIdOwners(str(tmp_path))
    owners.bind(1, ALICE)
    for _ in range(3):  # a transactional id passed back and forth
        owners.bind(2, BOB)
        owners.bind(2, ALICE)
    passes = encode_record(2, BOB) + encode_record(2, ALICE)
    assert file_bytes(tmp_path) == encode_record(1, ALICE) + 3 * passes
    reopened = ProducerIdOwners(str(tmp_path))
    assert (reopened.owner(1), reopened.owner(2)) == (ALICE, ALICE)
    assert file_bytes(tmp_path) == encode_record(1, ALICE) + encode_record(2, ALICE)
    assert not os.path.exists(str(tmp_path / FILE_NAME) + ".tmp")


def test_a_failed_write_leaves_no_partial_record(tmp_path, monkeypatch):
    owners = ProducerIdOwners(str(tmp_path))
    owners.bind(1, ALICE)
    whole = file_bytes(tmp_path)
    real_write = os.write

    def short_write(fd, data):
        return real_write(fd, data[:5])

    monkeypatch.setattr(os, "write", short_write)
    with pytest.raises(OSError):
        owners.bind(2, BOB)
    monkeypatch.setattr(os, "write", real_write)
    assert owners.owner(2) == ANONYMOUS
    assert file_bytes(tmp_path) == whole
