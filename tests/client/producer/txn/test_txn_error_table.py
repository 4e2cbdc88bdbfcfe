"""Every (request kind, error code) answer to a transactional request, against a recorded table.

For each coordinator request the transactional producer sends, in each situation it is sent
in (the scenarios below), the answer is every `ErrorCode` in turn plus one code the client
does not know. What follows is recorded through the manager's calls: the action the request's
error table gives, the state, what the waiting call gets (its error's type and message), the
producer's last error, what is sent next and after how long, the coordinators known, the
partitions in the transaction, and the offsets a retried TxnOffsetCommit still carries.

`txn_error_table.json` is the table recorded from the client before its request handling was
restructured (issue 9); the restructure must not change a single entry. A deliberate change of
behaviour regenerates it with `python -m client.producer.txn.test_txn_error_table` from tests/ and
shows up, entry by entry, in the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from client.producer.txn.txn_scenarios import (
    COORDINATOR,
    NOW,
    SCENARIOS,
    K,
    assert_matches_recorded,
    offsets_of,
    record,
    take,
)
from onceflow.client.producer.txn.request import TxnRequestKind
from onceflow.client.producer.txn.requests import REQUEST_TYPES
from onceflow.protocol.errors import ErrorCode

TABLE = Path(__file__).with_name("txn_error_table.json")
PAIRS = Path(__file__).with_name("txn_error_pairs.json")
UNKNOWN_CODE = 32000  # no ErrorCode has it
# for answers with two failing partitions: one code for each action of AddPartitionsToTxn
PAIR_CODES = [
    ErrorCode.NONE,  # COMPLETE
    ErrorCode.CONCURRENT_TRANSACTIONS,  # RETRY
    ErrorCode.NOT_COORDINATOR,  # LOOKUP
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,  # ABORTABLE
    ErrorCode.UNKNOWN_SERVER_ERROR,  # FATAL
    ErrorCode.PRODUCER_FENCED,  # FENCED
]


def _action(kind: TxnRequestKind, code: int) -> str:
    return REQUEST_TYPES[kind].action(code).name


CODES: list[int] = [int(code) for code in ErrorCode] + [UNKNOWN_CODE]


def _describe(error: BaseException | None) -> str | None:
    if error is None:
        return None
    flags = "".join(
        flag
        for flag, on in (
            ("F", getattr(error, "fatal", False)),
            ("A", getattr(error, "txn_requires_abort", False)),
        )
        if on
    )
    return f"{type(error).__name__}[{flags}]: {error}"


def _outcome(name: str, code: int, second: int = 0) -> dict[str, Any]:
    """What follows an answer to scenario `name` whose first key has `code` (for answers
    per partition, the second key has `second`)."""
    kind, setup, abort_while_in_flight = SCENARIOS[name]
    txn, result, keys = setup()
    request = take(txn, kind)
    abort = txn.begin_abort() if abort_while_in_flight else None
    codes = {key: (code if i == 0 else second) for i, key in enumerate(keys)}
    fields = {}
    if kind is K.FIND_COORDINATOR:
        fields = COORDINATOR
    elif kind is K.INIT_PRODUCER_ID:
        fields = {"producer_id": 7, "producer_epoch": 3}
    txn.on_response(request, NOW, codes, **fields)
    waiting = result if result is not None else request.result
    outcome: dict[str, Any] = {
        "state": txn.state.name,
        "result": ("pending" if not waiting.done else _describe(waiting.error) or "ok"),
        "last_error": _describe(txn.last_error),
        "producer": [txn.producer_id, txn.producer_epoch],
        "coordinators": sorted(f"{k[0]}:{k[1]}" for k in txn.coordinators),
        "in_transaction": sorted(f"{t}-{p}" for t, p in txn.partitions_in_transaction),
        "pending": sorted(f"{t}-{p}" for t, p in txn.pending_partitions),
        "started": txn.transaction_started,
    }
    if abort is not None:
        outcome["abort"] = "pending" if not abort.done else _describe(abort.error) or "ok"
    nxt, delay = txn.next_request(NOW, False)
    if nxt is None and delay < 1.0:  # a retry after a backoff
        nxt, _ = txn.next_request(NOW + delay, False)
    outcome["next"] = None if nxt is None else [nxt.kind.name, round(delay, 3)]
    if nxt is not None and nxt.kind is K.TXN_OFFSET_COMMIT:
        outcome["next_offsets"] = offsets_of(nxt)
    return outcome


def current_table() -> dict[str, dict[str, Any]]:
    table = {}
    for name, (kind, _setup, _abort) in SCENARIOS.items():
        for code in CODES:
            label = ErrorCode(code).name if code != UNKNOWN_CODE else f"unknown({code})"
            table[f"{name} / {label}"] = {"action": _action(kind, code), **_outcome(name, code)}
    return table


def current_pairs() -> dict[str, dict[str, Any]]:
    """AddPartitionsToTxn answered with two codes: the worse one decides."""
    return {
        f"{first.name} + {second.name}": _outcome("AddPartitionsToTxn", first, second)
        for first in PAIR_CODES
        for second in PAIR_CODES
    }


def test_every_answer_matches_the_recorded_table():
    assert_matches_recorded(TABLE, current_table())


def test_the_worse_of_two_answers_matches_the_recorded_table():
    assert_matches_recorded(PAIRS, current_pairs())


def test_table_covers_every_kind_and_code():
    kinds = {kind for kind, _setup, _abort in SCENARIOS.values()}
    assert kinds == set(TxnRequestKind)
    assert len(json.loads(TABLE.read_text())) == len(SCENARIOS) * len(CODES)


if __name__ == "__main__":
    record(TABLE, current_table())
    record(PAIRS, current_pairs())
