"""`__transaction_state` records: round trips (Hypothesis), layout, tombstones, generator output."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onceflow.common import TopicPartition
from onceflow.coordinator.txn.log_codec import (
    build_state_batch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    iter_state_records,
)
from onceflow.coordinator.txn.metadata import TxnTransitMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.internal import TransactionLogValue

ROOT = Path(__file__).resolve().parents[3]

int16 = st.integers(-1, 32767)
int64 = st.integers(-1, 2**63 - 1)
transits = st.builds(
    TxnTransitMetadata,
    producer_id=int64,
    previous_producer_id=int64,
    next_producer_id=int64,
    producer_epoch=int16,
    last_producer_epoch=int16,
    txn_timeout_ms=st.integers(1, 2**31 - 1),
    txn_state=st.sampled_from([s for s in TxnState if s is not TxnState.DEAD]),
    topic_partitions=st.frozensets(
        st.builds(TopicPartition, st.text(min_size=1, max_size=8), st.integers(0, 1000)),
        max_size=6,
    ),
    txn_start_timestamp=int64,
    txn_last_update_timestamp=int64,
    client_transaction_version=st.integers(0, 2),
)


@given(transits)
def test_value_round_trip(transit) -> None:
    assert decode_value(encode_value(transit)) == transit


@given(st.text(max_size=40))
def test_key_round_trip(tid) -> None:
    assert decode_key(encode_key(tid)) == tid


def test_key_layout() -> None:
    assert encode_key("ab") == b"\x00\x00" + b"\x00\x02ab"


def test_value_version_1_layout_and_version_0_read() -> None:
    transit = TxnTransitMetadata(
        5, -1, -1, 2, -1, 60000, TxnState.ONGOING, frozenset({TopicPartition("t", 1)}), 10, 11
    )
    data = encode_value(transit)
    assert data[:2] == b"\x00\x01"
    # v0 body written by hand: pid, epoch, timeout, status, partitions (int32 arrays), times
    v0 = (
        b"\x00\x00" + (5).to_bytes(8, "big") + (2).to_bytes(2, "big") + (60000).to_bytes(4, "big")
        + b"\x01" + (1).to_bytes(4, "big") + b"\x00\x01t" + (1).to_bytes(4, "big")
        + (1).to_bytes(4, "big") + (11).to_bytes(8, "big") + (10).to_bytes(8, "big")
    )  # fmt: skip
    assert decode_value(v0) == transit


def test_dead_is_a_tombstone() -> None:
    dead = TxnTransitMetadata(5, -1, -1, 2, -1, 1, TxnState.DEAD, frozenset(), -1, 11)
    assert encode_value(dead) is None and decode_value(None) is None


@pytest.mark.parametrize(
    "data", [b"\x00", b"\x00\x07" + b"\x00" * 40, b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05"]
)
def test_bad_values_raise(data) -> None:
    with pytest.raises(DecodeError):
        decode_value(data)


def test_unknown_status_raises() -> None:
    value = TransactionLogValue(producer_id=1, transaction_status=9).encode(1)
    with pytest.raises(DecodeError, match="status"):
        decode_value(b"\x00\x01" + value)


def test_batch_round_trip() -> None:
    transit = TxnTransitMetadata(5, -1, -1, 2, -1, 60000, TxnState.EMPTY, frozenset(), -1, 11)
    dead = TxnTransitMetadata(5, -1, -1, 2, -1, 60000, TxnState.DEAD, frozenset(), -1, 12)
    records = build_state_batch("a", transit, 11) + build_state_batch("a", dead, 12)
    assert [(tid, t) for _, tid, t in iter_state_records(records)] == [("a", transit), ("a", None)]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_messages", ROOT / "tools/gen_messages.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_messages", module)
    spec.loader.exec_module(module)
    return module


def test_generator_handles_any_data_spec(tmp_path) -> None:
    spec = {
        "type": "data",
        "name": "SomeRecordKey",
        "validVersions": "0-1",
        "flexibleVersions": "1+",
        "fields": [
            {"name": "Group", "type": "string", "versions": "0+"},
            {"name": "Extra", "type": "int32", "versions": "1+", "default": "-1"},
        ],
    }
    (tmp_path / "SomeRecordKey.json").write_text("// a comment\n" + json.dumps(spec))
    gen = _generator()
    outputs = gen.generate_internal(gen.load_local_specs(tmp_path))
    names = sorted(p.name for p in outputs)
    assert names == ["__init__.py", "some_record_key.py"]
    namespace: dict = {}
    source = outputs[gen.INTERNAL_DIR / "some_record_key.py"]
    exec(compile(source, "some_record_key", "exec"), namespace)
    cls = namespace["SomeRecordKey"]
    obj = cls(group="g", extra=3)
    assert cls.decode(obj.encode(1), 1) == obj
    assert obj.encode(1) == b"\x02g" + b"\x00\x00\x00\x03" + b"\x00"


def test_generator_rejects_non_data_spec(tmp_path) -> None:
    (tmp_path / "X.json").write_text(json.dumps({"type": "request", "name": "X"}))
    with pytest.raises(ValueError, match="data"):
        _generator().load_local_specs(tmp_path)


def test_committed_internal_output_is_current() -> None:
    gen = _generator()
    for path, text in gen.generate_internal(gen.load_local_specs()).items():
        assert path.read_text("utf-8") == text, path
