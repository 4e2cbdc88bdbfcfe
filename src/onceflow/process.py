"""Child processes that do not outlive the command that started them, and the TEST-ONLY crash
that fault points use to end the broker as kill -9 would (`crash`).

`child_options()` gives `subprocess.Popen` a `preexec_fn` that, on Linux, asks the kernel
(prctl PR_SET_PDEATHSIG) to send the child SIGTERM when its parent dies, so a child broker or
Spark driver stops even when the command that started it is killed with SIGKILL and its own
cleanup never runs. libc is loaded in the parent; the child only makes the one call, so the
hook does no imports or allocation-heavy work between fork and exec. Elsewhere it is empty
(the parent's normal cleanup still applies).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
from typing import Any, NoReturn

_PR_SET_PDEATHSIG = 1
CRASH_EXIT_STATUS = 137  # 128 + SIGKILL: what the parent sees after kill -9

log = logging.getLogger("onceflow.faults")


def crash(point: str) -> NoReturn:
    """End the process at once, without cleanup or flush, with kill -9's exit status (for
    TEST-ONLY fault points: the transaction coordinator's, the log cleaner's)."""
    log.critical("%s: TEST-ONLY fault point reached, exiting as kill -9 would", point)
    os._exit(CRASH_EXIT_STATUS)


def child_options() -> dict[str, Any]:
    """Popen keyword arguments for a child that dies with this process."""
    if not sys.platform.startswith("linux"):
        return {}
    prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").prctl
    parent = os.getpid()
    term = int(signal.SIGTERM)

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, term, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return {"preexec_fn": die_with_parent}
