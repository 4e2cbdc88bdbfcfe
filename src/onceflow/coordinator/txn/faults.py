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
from collections.abc import Callable

from onceflow.process import crash

__all__ = ["AFTER_PREPARE_COMMIT", "CRASH_AFTER_PREPARE_ENV", "crash_hook"]

AFTER_PREPARE_COMMIT = "onceflow.test.crash.after.prepare"
CRASH_AFTER_PREPARE_ENV = "ONCEFLOW_TEST_CRASH_AFTER_PREPARE"


def crash_hook(point: str, installed: bool) -> Callable[[], None] | None:
    """The hook of `point`: a crash there if a test `installed` it, else None."""
    return functools.partial(crash, point) if installed else None
