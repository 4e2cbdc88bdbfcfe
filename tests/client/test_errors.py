"""The error a broker code turns into is the class users catch from `onceflow.client`."""

from __future__ import annotations

import pytest

import onceflow.client
from onceflow.client import errors
from onceflow.client.errors import ERRORS_BY_CODE, error_for_code, raise_for_error
from onceflow.protocol.errors import ErrorCode


def test_transaction_abortable_code_is_the_exported_class():
    error = error_for_code(ErrorCode.TRANSACTION_ABORTABLE, "the coordinator timed it out")
    assert isinstance(error, onceflow.client.TransactionAbortableError)
    assert error.code == ErrorCode.TRANSACTION_ABORTABLE
    assert not error.retriable and error.cause is None
    assert "the coordinator timed it out" in str(error)
    with pytest.raises(onceflow.client.TransactionAbortableError):
        raise_for_error(120)


def test_transaction_abortable_made_from_a_cause_keeps_it():
    cause = error_for_code(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    error = onceflow.client.TransactionAbortableError(cause)
    assert error.cause is cause and error.__cause__ is cause
    assert error.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and error.txn_requires_abort


@pytest.mark.parametrize("code", sorted(ERRORS_BY_CODE))
def test_no_exported_class_shadows_the_class_of_a_code(code):
    cls = ERRORS_BY_CODE[code]
    assert getattr(errors, cls.__name__) is cls
    exported = getattr(onceflow.client, cls.__name__, cls)
    assert exported is cls
