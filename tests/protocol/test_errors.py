"""Error codes checked against two independent lists: kio's ErrorCode and kafka-python's errors."""

from __future__ import annotations

import inspect

import kafka.errors
from kio.schema.errors import ErrorCode as KioErrorCode

from onceflow.protocol.errors import RETRIABLE, ErrorCode


def test_same_codes_names_and_retriability_as_kio() -> None:
    theirs = {member.value: member for member in KioErrorCode}
    assert {code.value for code in ErrorCode} >= set(theirs)
    for value, member in theirs.items():
        ours = ErrorCode(value)
        assert ours.name == member.name.upper()
        assert ours.retriable == member.retriable, ours


def test_every_kafka_python_errno_is_known() -> None:
    for _, cls in inspect.getmembers(kafka.errors, inspect.isclass):
        errno = getattr(cls, "errno", None)
        if isinstance(errno, int) and issubclass(cls, kafka.errors.BrokerResponseError):
            assert errno in ErrorCode._value2member_map_, cls
            assert ErrorCode(errno).value == errno, cls


def test_contiguous_and_newest_codes() -> None:
    values = sorted(code.value for code in ErrorCode)
    assert values == list(range(-1, values[-1] + 1))
    assert ErrorCode.TRANSACTION_ABORTABLE == 120
    assert ErrorCode.INVALID_RECORD_STATE == 121
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1 and ErrorCode.NONE == 0


def test_retriable_set_and_of() -> None:
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER in RETRIABLE
    assert ErrorCode.PRODUCER_FENCED not in RETRIABLE
    assert ErrorCode.of(51) is ErrorCode.CONCURRENT_TRANSACTIONS
    assert ErrorCode.of(30000) == 30000


def test_generated_error_classes_are_current() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    check = [sys.executable, str(root / "tools" / "gen_errors.py"), "--check"]
    result = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
