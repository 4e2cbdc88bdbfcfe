"""Exponential backoff with jitter for the client's retries and reconnects (KIP-580, KIP-144).

`ExponentialBackoff(initial_ms, max_ms)` answers how long to wait after a number of
consecutive failures: `backoff_ms(0)` is about `initial_ms`, each further failure multiplies
it by `multiplier` (2), never past `max_ms`, and each answer is spread by a random factor
in [1 - jitter, 1 + jitter] (jitter 0.2) so that many clients that failed together do not
retry together. The cap applies after the jitter, so a capped wait is at most `max_ms`.
When `initial_ms >= max_ms` the wait is `max_ms` every time, without jitter; without
`max_ms` it is `initial_ms` every time (how components built without a maximum, as in unit
tests, keep a fixed backoff). These are the semantics of Kafka's `ExponentialBackoff` as its
clients use it for `retry.backoff.ms`/`retry.backoff.max.ms` and
`reconnect.backoff.ms`/`reconnect.backoff.max.ms`.

`FailureBackoff` counts consecutive failures per key (a node, a kind of request) and returns
the wait after each; `succeeded(key)` starts the count again. Not thread-safe: each user
keeps its own (the I/O thread's, or one per blocking call).

Deviation: Kafka draws a new random factor each time it checks whether a backoff is over;
callers here draw once per failure and remember the deadline, which keeps the wait stable.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping
from typing import Any

__all__ = ["ExponentialBackoff", "FailureBackoff", "reconnect_backoff", "retry_backoff"]

MULTIPLIER = 2  # Kafka's CommonClientConfigs.RETRY_BACKOFF_EXP_BASE
JITTER = 0.2  # Kafka's CommonClientConfigs.RETRY_BACKOFF_JITTER

Uniform = Callable[[float, float], float]


class ExponentialBackoff:
    """The wait after `attempts` consecutive failures (0: after the first one)."""

    def __init__(
        self,
        initial_ms: float,
        max_ms: float | None = None,
        multiplier: float = MULTIPLIER,
        jitter: float = JITTER,
        uniform: Uniform | None = None,
    ):
        if not 0 <= jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, not {jitter}")
        if multiplier <= 1:
            raise ValueError(f"multiplier must be above 1, not {multiplier}")
        if max_ms is None:  # no maximum: a constant initial_ms
            max_ms = initial_ms
        self.initial_ms = min(initial_ms, max_ms)
        self.max_ms = max_ms
        self.multiplier = multiplier
        self.jitter = jitter
        self.uniform = uniform or random.uniform
        # the exponent at which the cap is reached; 0 means a constant backoff
        self._max_exponent = (
            math.log(max_ms / max(initial_ms, 1), multiplier) if max_ms > initial_ms else 0.0
        )

    def backoff_ms(self, attempts: int) -> float:
        if self._max_exponent == 0:
            return self.initial_ms
        exponent = min(max(attempts, 0), self._max_exponent)
        factor = self.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter else 1.0
        return min(factor * self.initial_ms * math.pow(self.multiplier, exponent), self.max_ms)

    def backoff_s(self, attempts: int) -> float:
        return self.backoff_ms(attempts) / 1000

    def __repr__(self) -> str:
        return f"ExponentialBackoff({self.initial_ms}, {self.max_ms})"


class FailureBackoff:
    """Consecutive failures per key, and the wait after each (see the module docstring)."""

    def __init__(self, backoff: ExponentialBackoff):
        self.backoff = backoff
        self._failures: dict[Hashable, int] = {}

    def failed(self, key: Hashable = None) -> float:
        """Count a failure of `key`; returns the seconds to wait before trying it again."""
        attempts = self._failures.get(key, 0)
        self._failures[key] = attempts + 1
        return self.backoff.backoff_s(attempts)

    def succeeded(self, key: Hashable = None) -> None:
        """`key` worked: its next failure waits the initial backoff again."""
        self._failures.pop(key, None)

    def failures(self, key: Hashable = None) -> int:
        return self._failures.get(key, 0)


def retry_backoff(config: Mapping[str, Any]) -> ExponentialBackoff:
    """`retry.backoff.ms` growing to `retry.backoff.max.ms`."""
    return ExponentialBackoff(config["retry.backoff.ms"], config["retry.backoff.max.ms"])


def reconnect_backoff(config: Mapping[str, Any]) -> ExponentialBackoff:
    """`reconnect.backoff.ms` growing to `reconnect.backoff.max.ms`."""
    return ExponentialBackoff(config["reconnect.backoff.ms"], config["reconnect.backoff.max.ms"])
