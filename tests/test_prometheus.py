"""Reading Prometheus text back (`onceflow.prometheus.parse`, `onceflow.scrape.Scrape`): what
the broker writes parses to the same names, labels and values; anything else is refused with
the line that is wrong."""

from __future__ import annotations

import math

import pytest

from onceflow.prometheus import Sample, header, parse, sample
from onceflow.scrape import Scrape, utc_text


def test_what_the_writer_writes_parses_back() -> None:
    out: list[str] = []
    header(out, "onceflow_x_total", "counter", "A counter.")
    out.append(sample("onceflow_x_total", {}, 7))
    odd = 'a "quoted", back\\slash\nnew line}'
    out.append(sample("onceflow_partition_dirty_ratio", {"topic": odd, "partition": "3"}, 0.25))
    out.append('onceflow_log_flush_seconds_bucket{le="+Inf"} 12 1700000000000')
    out.append("onceflow_y +Inf")
    out.append("")
    assert parse("\n".join(out)) == [
        Sample("onceflow_x_total", {}, 7.0),
        Sample("onceflow_partition_dirty_ratio", {"topic": odd, "partition": "3"}, 0.25),
        Sample("onceflow_log_flush_seconds_bucket", {"le": "+Inf"}, 12.0),
        Sample("onceflow_y", {}, math.inf),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "<html>not metrics</html>",
        "onceflow_x 1 2 3",
        "onceflow_x{topic=unquoted} 1",
        'onceflow_x{topic="a" partition="1"} 1',
        "onceflow_x twelve",
        "onceflow_x",
    ],
)
def test_anything_else_is_refused_naming_the_line(line: str) -> None:
    with pytest.raises(ValueError, match=r"^line 2 is not a Prometheus sample"):
        parse(f"onceflow_ok 1\n{line}\n")


def test_lookups() -> None:
    metrics = Scrape(
        parse(
            'onceflow_requests_total{api="PRODUCE"} 5\n'
            'onceflow_requests_total{api="FETCH"} 2\n'
            'onceflow_partition_dirty_ratio{topic="t",partition="1"} 0.5\n'
            'onceflow_partition_dirty_ratio{topic="t"} 0.9\n'
        )
    )
    assert metrics.total("onceflow_requests_total") == 7
    assert metrics.total("onceflow_missing") is None
    assert metrics.value("onceflow_missing", -1) == -1
    assert metrics.by_label("onceflow_requests_total", "api") == {"PRODUCE": 5, "FETCH": 2}
    assert metrics.by_partition("onceflow_partition_dirty_ratio") == {("t", 1): 0.5}
    assert utc_text(-1) == "never"
    assert utc_text(1_700_000_000_000) == "2023-11-14T22:13:20Z"


def test_only_reads_the_names_asked_for() -> None:
    text = (
        'onceflow_partition_high_watermark{topic="t",partition="0"} 9\n'
        "onceflow_partition_broken{ 1\n"  # skipped unread
        "onceflow_requests_total 3\n"
        "onceflow_requests_totally{ 1\n"  # read: it starts with a prefix asked for
    )
    with pytest.raises(ValueError, match="^line 4 "):
        parse(text, only=("onceflow_requests_total",))
    assert parse(text[: text.index("onceflow_requests_totally")], ("onceflow_requests",)) == [
        Sample("onceflow_requests_total", {}, 3.0)
    ]
