"""`onceflow demo --report FILE.html`: the demo run as one self-contained HTML page (inline
CSS and SVG, no script or font from elsewhere): the verdict of the exactly-once check, the
input and output counts, a timeline of driver runs, micro-batches and the kills, and the
event list. The run's data is embedded as JSON (`<script id="demo-run">`), so the page can be
drawn again (`Timeline.from_json`). The console's /demo page draws the same while the demo
runs (`timeline_svg`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from html import escape
from pathlib import Path

from onceflow.cli.demo_timeline import (
    BROKER_KILL,
    BROKER_RESTART,
    DRIVER_END,
    DRIVER_KILL,
    DRIVER_START,
    PHASE,
    Timeline,
)

WIDTH, LEFT, LANE = 960, 120, 34
COLOURS = {"ok": "#2e7d32", "killed": "#c62828", "failed": "#ef6c00", "batch": "#1565c0"}
LEGEND = (
    "Driver runs: green finished, red SIGKILLed, orange failed. A micro-batch spans Spark's "
    "batch timestamp to its commit; a batch re-run after a crash keeps the timestamp its "
    "first run planned it with. Dashed lines: the kills the demo caused; green tick: the "
    "broker back. Hover for details."
)
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.verdict { padding: .6em 1em; border-radius: 4px; color: #fff; font-weight: 600; }
.passed { background: #2e7d32; } .failed { background: #c62828; } .running { background: #555; }
table { border-collapse: collapse; } td, th { padding: .2em .8em; border-bottom: 1px solid #ddd;
text-align: left; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
svg text { font: 11px system-ui, sans-serif; } .muted { color: #666; }
"""


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _verdict(run: Timeline) -> tuple[str, str]:
    """(css class, text) of the exactly-once check."""
    summary = run.summary
    if "ok" not in summary and run.finished is not None:
        return "failed", f"the demo stopped before its check: {run.phase}"
    if "ok" not in summary:
        return "running", f"running: {run.phase}"
    if summary["ok"]:
        return "passed", "exactly-once check PASSED"
    return "failed", "exactly-once check FAILED: " + "; ".join(summary.get("problems", []))


def counts_table(run: Timeline) -> str:
    """The check's figures as an HTML table (empty before the check ran)."""
    s = run.summary
    if "ok" not in s:
        return ""
    rows = [
        ("input orders (committed)", s["records"]),
        (
            "aborted input orders",
            f"{s['aborted_inputs']} in {s['aborted_transactions']} aborted transactions",
        ),
        ("output records", s["outputs"]),
        ("duplicates", s["duplicates"]),
        ("missing", s["missing"]),
        ("aborted input seen in output", s["aborted_seen"]),
        ("open transactions left", "yes" if s["open_transactions"] else "none"),
        ("micro-batches committed", s["batches"]),
        ("driver runs", len(s["driver_runs"])),
    ]
    body = "".join(
        f"<tr><th>{escape(k)}</th><td class=n>{escape(str(v))}</td></tr>" for k, v in rows
    )
    return f"<table>{body}</table>"


def timeline_svg(run: Timeline) -> str:
    """The run on a time axis: phases, driver runs (green: finished, red: SIGKILLed, orange:
    failed), micro-batches (start to commit) and a line at each kill."""
    end = run.finished or max(
        [run.started + 1] + [e.at for e in run.events] + [b.committed for b in run.batches]
    )
    span = max(end - run.started, 1e-3)

    def x(at: float) -> float:
        return LEFT + (at - run.started) / span * (WIDTH - LEFT - 10)

    lanes = ["phase", "driver runs", "micro-batches", "faults"]
    height = LANE * len(lanes) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="demo timeline">'
    ]
    for i, lane in enumerate(lanes):
        out.append(f'<text x="4" y="{i * LANE + 21}">{lane}</text>')
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - 10}" y1="{(i + 1) * LANE}" '
            f'y2="{(i + 1) * LANE}" stroke="#eee"/>'
        )
    phases = [e for e in run.events if e.kind == PHASE]
    for n, event in enumerate(phases):
        stop = phases[n + 1].at if n + 1 < len(phases) else end
        colour = "#78909c" if n % 2 else "#90a4ae"
        out.append(_bar(x(event.at), x(stop), 0, colour, event.text, label=event.text))
    out += _driver_bars(run, x, end)
    for batch in run.batches:
        title = (
            f"batch {batch.batch_id}: started {_clock(batch.started)}, committed "
            f"{_clock(batch.committed)}, {batch.input_offsets} input offsets"
        )
        out.append(
            _bar(
                x(batch.started),
                x(batch.committed),
                2,
                COLOURS["batch"],
                title,
                label=str(batch.batch_id),
            )
        )
    for event in run.events:
        if event.kind in (DRIVER_KILL, BROKER_KILL):
            colour = "#b71c1c" if event.kind == BROKER_KILL else COLOURS["killed"]
            out.append(
                f'<line x1="{x(event.at):.1f}" x2="{x(event.at):.1f}" y1="{LANE}" '
                f'y2="{4 * LANE}" stroke="{colour}" stroke-width="2" '
                f'stroke-dasharray="4 2"><title>{escape(event.text)}</title></line>'
            )
            label = "broker kill -9" if event.kind == BROKER_KILL else "driver SIGKILL"
            out.append(
                f'<text x="{x(event.at) + 3:.1f}" y="{3 * LANE + 21}" fill="{colour}">'
                f"{label}</text>"
            )
        if event.kind == BROKER_RESTART:
            out.append(
                f'<line x1="{x(event.at):.1f}" x2="{x(event.at):.1f}" y1="{3 * LANE}" '
                f'y2="{4 * LANE}" stroke="{COLOURS["ok"]}" stroke-width="2">'
                f"<title>{escape(event.text)}</title></line>"
            )
    for tick in range(0, int(span) + 1, max(int(span / 8), 1)):
        out.append(
            f'<text x="{x(run.started + tick):.1f}" y="{height - 8}" '
            f'text-anchor="middle" class="muted">{tick} s</text>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _driver_bars(run: Timeline, x: Callable[[float], float], end: float) -> list[str]:
    out, start = [], None
    for event in run.events:
        if event.kind == DRIVER_START:
            start = event
        elif event.kind in (DRIVER_END, DRIVER_KILL) and start is not None:
            outcome = (
                "killed"
                if event.kind == DRIVER_KILL
                else "ok"
                if "finished" in event.text
                else "failed"
            )
            label = event.text.split(" ", 3)[2] if event.text.startswith("driver run") else ""
            out.append(
                _bar(x(start.at), x(event.at), 1, COLOURS[outcome], event.text, f"run {label}")
            )
            start = None
    if start is not None:
        out.append(_bar(x(start.at), x(end), 1, "#9e9e9e", start.text + " (running)"))
    return out


def _bar(x0: float, x1: float, lane: int, colour: str, title: str, label: str = "") -> str:
    width = max(x1 - x0, 2.0)
    text = (
        f'<text x="{x0 + width / 2:.1f}" y="{lane * LANE + 21}" fill="#fff" '
        f'text-anchor="middle">{escape(label)}</text>'
        if label and width > 7 * len(label)
        else ""
    )
    return (
        f'<g><rect x="{x0:.1f}" y="{lane * LANE + 6}" width="{width:.1f}" height="{LANE - 12}" '
        f'fill="{colour}" rx="2"><title>{escape(title)}</title></rect>{text}</g>'
    )


def events_table(run: Timeline) -> str:
    """Every event with its time and offset from the start."""
    rows = "".join(
        f"<tr><td>{_clock(e.at)}</td><td class=n>+{e.at - run.started:.1f} s</td>"
        f"<td>{escape(e.kind)}</td><td>{escape(e.text)}</td></tr>"
        for e in run.events
    )
    return f"<table><tr><th>time</th><th></th><th>event</th><th></th></tr>{rows}</table>"


def render_report(run: Timeline, title: str = "onceflow demo") -> str:
    """The whole page."""
    css, verdict = _verdict(run)
    data = json.dumps(run.to_json()).replace("</", "<\\/")
    via = escape(str(run.summary.get("bootstrap", "")))
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}: exactly-once Spark "
        f"pipeline</h1><p class=muted>{_clock(run.started)} &ndash; "
        f"{_clock(run.finished) if run.finished else 'now'} via {via}</p>"
        f'<p class="verdict {css}">{escape(verdict)}</p>{counts_table(run)}'
        f"<h2>Timeline</h2>{timeline_svg(run)}<p class=muted>{LEGEND}</p>"
        f"<h2>Events</h2>{events_table(run)}"
        f'<script type="application/json" id="demo-run">{data}</script></body></html>\n'
    )


def write_report(path: Path, run: Timeline) -> None:
    """Write the page for `run` to `path`."""
    path.write_text(render_report(run), encoding="utf-8")
