"""Scenarios that bring a transactional producer's state (`TxnManager`, no I/O) to the point
where a coordinator request of a given kind is sent next: shared by the tests that record what
each request does with every answer and which bytes it sends."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onceflow.client.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.client.producer.txn.request import TxnRequest, TxnRequestKind

K = TxnRequestKind
NOW = 1000.0
TP, TP2, TP3 = ("out", 0), ("out", 1), ("out", 2)
IN0, IN1 = ("in", 0), ("in", 1)
GROUP_META = ConsumerGroupMetadata("g", 3, "member-1", None)
COORDINATOR = {"node_id": 0, "host": "127.0.0.1", "port": 9092}


def offsets_of(request: TxnRequest) -> list[str]:
    return sorted(f"{t}-{p}" for t, p in request.offsets)


def take(txn: TxnManager, kind: TxnRequestKind, now: float = NOW) -> TxnRequest:
    request, _delay = txn.next_request(now, False)
    assert request is not None and request.kind is kind, (request, kind)
    return request


def answer_ok(
    txn: TxnManager, kind: TxnRequestKind, codes: dict | None = None, **fields: Any
) -> None:
    request = take(txn, kind)
    if kind is K.FIND_COORDINATOR:
        fields = {**COORDINATOR, **fields}
    if kind is K.INIT_PRODUCER_ID:
        fields = {"producer_id": 7, "producer_epoch": 2, **fields}
    txn.on_response(request, NOW, codes or {None: 0}, **fields)


def ready() -> TxnManager:
    txn = TxnManager("tid", 60_000)
    init = txn.begin_init()
    answer_ok(txn, K.FIND_COORDINATOR)
    answer_ok(txn, K.INIT_PRODUCER_ID)
    init.wait(0)
    return txn


def started() -> TxnManager:
    txn = ready()
    txn.begin_transaction()
    txn.maybe_add_partition(TP)
    answer_ok(txn, K.ADD_PARTITIONS_TO_TXN, {TP: 0})
    return txn


# a scenario brings a manager to the point where a request of its kind is next; it returns
# the manager, the result a call waits on (or None), and the keys of the answer's error codes
Setup = Callable[[], tuple[TxnManager, Any, list]]


def _find_coordinator_at_init():
    txn = TxnManager("tid", 60_000)
    return txn, txn.begin_init(), [None]


def _init_producer_id_at_init():
    txn = TxnManager("tid", 60_000)
    result = txn.begin_init()
    answer_ok(txn, K.FIND_COORDINATOR)
    return txn, result, [None]


def _init_producer_id_after_abort():
    txn = started()
    txn.epoch_bump_required = True  # a batch failed with its sequence unresolved (KIP-360)
    result = txn.begin_abort()
    answer_ok(txn, K.END_TXN)
    return txn, result, [None]


def _add_partitions():
    txn = started()
    txn.maybe_add_partition(TP2)
    txn.maybe_add_partition(TP3)
    return txn, None, [TP2, TP3]


def _add_offsets():
    txn = started()
    return txn, txn.send_offsets({IN0: OffsetAndMetadata(5)}, GROUP_META), [None]


def _find_group_coordinator():
    txn = started()
    result = txn.send_offsets({IN0: OffsetAndMetadata(5)}, GROUP_META)
    answer_ok(txn, K.ADD_OFFSETS_TO_TXN)
    return txn, result, [None]


def _txn_offset_commit():
    txn = started()
    result = txn.send_offsets({IN0: OffsetAndMetadata(5), IN1: OffsetAndMetadata(6)}, GROUP_META)
    answer_ok(txn, K.ADD_OFFSETS_TO_TXN)
    answer_ok(txn, K.FIND_COORDINATOR)
    return txn, result, [IN0, IN1]


def _end_txn_commit():
    txn = started()
    return txn, txn.begin_commit(), [None]


def _end_txn_abort():
    txn = started()
    return txn, txn.begin_abort(), [None]


# name -> (the request kind answered, its setup, whether the abort begins while it is in flight)
SCENARIOS: dict[str, tuple[TxnRequestKind, Setup, bool]] = {
    "FindCoordinator(transaction) at init": (K.FIND_COORDINATOR, _find_coordinator_at_init, False),
    "FindCoordinator(group) for offsets": (K.FIND_COORDINATOR, _find_group_coordinator, False),
    "InitProducerId at init": (K.INIT_PRODUCER_ID, _init_producer_id_at_init, False),
    "InitProducerId epoch bump after abort": (
        K.INIT_PRODUCER_ID,
        _init_producer_id_after_abort,
        False,
    ),
    "AddPartitionsToTxn": (K.ADD_PARTITIONS_TO_TXN, _add_partitions, False),
    "AddPartitionsToTxn answered while aborting": (K.ADD_PARTITIONS_TO_TXN, _add_partitions, True),
    "AddOffsetsToTxn": (K.ADD_OFFSETS_TO_TXN, _add_offsets, False),
    "TxnOffsetCommit": (K.TXN_OFFSET_COMMIT, _txn_offset_commit, False),
    "TxnOffsetCommit answered while aborting": (K.TXN_OFFSET_COMMIT, _txn_offset_commit, True),
    "EndTxn(commit)": (K.END_TXN, _end_txn_commit, False),
    "EndTxn(abort)": (K.END_TXN, _end_txn_abort, False),
}


def assert_matches_recorded(path: Path, current: dict[str, Any]) -> None:
    """Every entry of `current` equals the one recorded in `path` (a JSON object)."""
    recorded = json.loads(path.read_text())
    assert current.keys() == recorded.keys()
    differences = {k: (recorded[k], current[k]) for k in recorded if recorded[k] != current[k]}
    assert not differences, f"{len(differences)} entries changed: {differences}"


def record(path: Path, table: dict[str, Any]) -> None:
    """Write `table` to `path`, one entry a line, so that a change shows entry by entry."""
    lines = [
        f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in sorted(table.items())
    ]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
