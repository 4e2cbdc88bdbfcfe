"""The cleaner's I/O throttle holds the observed rate to the limit (fake clock)."""

from __future__ import annotations

from onceflow.log.cleaner.throttler import Throttler


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_sleeps_back_to_the_limit():
    clock = FakeClock()
    throttler = Throttler(1000.0, clock, clock.sleep)
    throttler.maybe_throttle(500)  # within the 100 ms window: no check yet
    assert clock.slept == []
    clock.now = 0.2
    throttler.maybe_throttle(500)  # 1000 bytes in 0.2 s: 1 s needed at 1000 B/s
    assert clock.slept == [0.8]
    clock.now += 2.0
    throttler.maybe_throttle(1000)  # 1000 bytes in 2 s: under the limit
    assert clock.slept == [0.8]


def test_unlimited_never_sleeps():
    clock = FakeClock()
    throttler = Throttler(float("inf"), clock, clock.sleep)
    clock.now = 1.0
    throttler.maybe_throttle(10**12)
    assert clock.slept == []
