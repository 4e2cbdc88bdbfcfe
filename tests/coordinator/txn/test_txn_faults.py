"""TEST-ONLY fault points of the transaction coordinator: installed only on request."""

from __future__ import annotations

import pytest

from onceflow import process
from onceflow.coordinator.txn import faults
from onceflow.coordinator.txn.config import TxnConfig
from onceflow.coordinator.txn.faults import CRASH_AFTER_PREPARE_ENV


class Exited(Exception):
    """Stands in for the process ending."""


def test_a_point_not_installed_has_no_hook() -> None:
    assert faults.crash_hook(faults.AFTER_PREPARE_COMMIT, False) is None


def test_an_installed_point_exits_with_kill_9s_status(monkeypatch) -> None:
    def fake_exit(status: int):
        raise Exited(status)

    monkeypatch.setattr(process.os, "_exit", fake_exit)
    hook = faults.crash_hook(faults.AFTER_PREPARE_COMMIT, True)
    with pytest.raises(Exited) as raised:
        hook()
    assert raised.value.args == (137,)


@pytest.mark.parametrize(
    ("props", "env", "installed"),
    [
        ({}, None, False),
        ({"onceflow.test.crash.after.prepare": "true"}, None, True),
        ({"onceflow.test.crash.after.prepare": False}, None, False),
        ({}, "true", True),
        ({}, "no", False),
    ],
)
def test_config_key_and_environment_install_after_prepare_commit(
    monkeypatch, props, env, installed
) -> None:
    if env is None:
        monkeypatch.delenv(CRASH_AFTER_PREPARE_ENV, raising=False)
    else:
        monkeypatch.setenv(CRASH_AFTER_PREPARE_ENV, env)
    assert TxnConfig.from_properties(props).crash_after_prepare is installed
