"""The overview's throughput measurement (console/throughput.py) without a cluster: growth of
the high watermarks between polls, partitions that come, go or shrink, polls too close
together, the kept history, and the sparkline drawn from it."""

from __future__ import annotations

import re

from onceflow.common import TopicPartition
from onceflow.console.throughput import (
    MIN_INTERVAL_MS,
    ThroughputHistory,
    ThroughputSample,
    sparkline_svg,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_growth_between_polls_in_records_per_second() -> None:
    history = ThroughputHistory()
    history.record(10_000, {A0: 5, A1: 0})
    assert history.samples() == []  # the first poll only sets the starting point
    history.record(12_000, {A0: 25, A1: 10})
    assert history.samples() == [ThroughputSample(12_000, 30, 15.0)]


def test_new_vanished_and_shrunk_partitions_count_nothing() -> None:
    history = ThroughputHistory()
    history.record(0, {A0: 100, A1: 7})
    # a1 gone, b0 new, a0 shrank (deleted and made again): nothing was measured as written
    history.record(1_000, {A0: 3, B0: 50})
    history.record(2_000, {A0: 4, B0: 60})
    assert [s.records for s in history.samples()] == [0, 11]


def test_polls_closer_than_the_interval_measure_nothing() -> None:
    history = ThroughputHistory()
    history.record(0, {A0: 0})
    assert history.due(MIN_INTERVAL_MS - 1) is False
    history.record(MIN_INTERVAL_MS - 1, {A0: 10})
    assert history.samples() == []
    history.record(MIN_INTERVAL_MS, {A0: 10})
    assert history.samples() == [ThroughputSample(MIN_INTERVAL_MS, 10, 10.0)]


def test_only_the_last_samples_are_kept() -> None:
    history = ThroughputHistory(max_samples=3)
    for i in range(6):
        history.record(i * 1_000, {A0: i * i})
    assert [s.records for s in history.samples()] == [5, 7, 9]


def test_sparkline_needs_two_samples_and_scales_to_the_highest() -> None:
    assert "<svg" not in sparkline_svg([ThroughputSample(1_000, 5, 5.0)])
    svg = sparkline_svg([ThroughputSample(1_000, 0, 0.0), ThroughputSample(2_000, 8, 8.0),
                         ThroughputSample(3_000, 4, 4.0)])  # fmt: skip
    points = re.search(r'points="([^"]+)"', svg)
    assert points is not None
    ys = [float(p.split(",")[1]) for p in points.group(1).split()]
    assert ys[1] < ys[2] < ys[0]  # SVG's y grows downwards: the highest rate is the top point
    assert "4 records/s now, at most 8" in svg
