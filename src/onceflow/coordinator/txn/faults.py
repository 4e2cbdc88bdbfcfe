"""TEST-ONLY fault points of the transaction coordinator (never installed in production).

At a fault point the coordinator calls a hook that is None unless a fault test installed the
point; the hook makes the broker die there as kill -9 would. No other code of the
coordinator ends the process. The points:

- `AFTER_PREPARE_COMMIT` (`TransactionCoordinator.after_prepare_commit`): right after a
  PREPARE_COMMIT is durable, before any marker is written. Installed by the broker config key
  `onceflow.test.crash.after.prepare=true` or the environment variable
  `ONCEFLOW_TEST_CRASH_AFTER_PREPARE=true`, both read by `TxnConfig.from_properties` when the
  broker starts.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import NoReturn

__all__ = ["AFTER_PREPARE_COMMIT", "CRASH_AFTER_PREPARE_ENV", "crash", "crash_hook"]

log = logging.getLogger("onceflow.coordinator.txn")

AFTER_PREPARE_COMMIT = "onceflow.test.crash.after.prepare"
CRASH_AFTER_PREPARE_ENV = "ONCEFLOW_TEST_CRASH_AFTER_PREPARE"
CRASH_EXIT_STATUS = 137  # 128 + SIGKILL: what the parent sees after kill -9


def crash(point: str) -> NoReturn:
    """End the process at once, without cleanup or flush, with kill -9's exit status."""
    log.critical("%s: TEST-ONLY fault point reached, exiting as kill -9 would", point)
    os._exit(CRASH_EXIT_STATUS)


def crash_hook(point: str, installed: bool) -> Callable[[], None] | None:
    """The hook of `point`: a crash there if a test `installed` it, else None."""
    return functools.partial(crash, point) if installed else None
