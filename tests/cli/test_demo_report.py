"""`onceflow demo --report`: the HTML report of a recorded demo run (tests/cli/demo_run.json,
the `<script id="demo-run">` data of a real `onceflow demo --records 2000 --faults all`
report), the checkpoint reader the timeline's micro-batches come from, and the console's
/demo page. The demo itself runs in tests/cli/test_cli_demo.py (slow)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from onceflow.cli.demo_report import render_report, write_report
from onceflow.cli.demo_timeline import (
    BROKER_KILL,
    DRIVER_KILL,
    Timeline,
    read_batches,
)

RECORDED = Path(__file__).parent / "demo_run.json"


def recorded() -> Timeline:
    return Timeline.from_json(json.loads(RECORDED.read_text()))


def embedded_run(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="demo-run">(.*?)</script>', html)
    assert found, "no embedded run data"
    return json.loads(found.group(1).replace("<\\/", "</"))


def test_report_names_the_kills_the_batches_and_the_verdict(tmp_path):
    run = recorded()
    path = tmp_path / "demo.html"
    write_report(path, run)
    html = path.read_text()
    assert "exactly-once check PASSED" in html
    assert html.count("driver SIGKILL") == 2 and html.count("broker kill -9") == 1
    assert "SIGKILLed at task.midway@1" in html and "SIGKILLed at driver.between_commits@2" in html
    for batch in run.batches:
        assert f"batch {batch.batch_id}: started" in html
    assert f"<th>output records</th><td class=n>{run.summary['outputs']}</td>" in html
    assert "<th>duplicates</th><td class=n>0</td>" in html


def test_report_is_self_contained():
    html = render_report(recorded())
    assert "<svg" in html and "<style>" in html
    assert not re.search(r"<script[^>]*\bsrc=|<link|<img|@import|url\(", html)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_report_embeds_the_run_it_draws():
    run = recorded()
    again = Timeline.from_json(embedded_run(render_report(run)))
    assert again.events == run.events and again.batches == run.batches
    assert again.summary == run.summary


def test_recorded_run_is_in_time_order_and_its_kills_hit_running_drivers():
    """The recorded data is what the demo saw: batches commit after they start, each kill
    falls inside the pipeline phase, and the broker kill lies between two batch commits."""
    run = recorded()
    assert [b.batch_id for b in run.batches] == list(range(len(run.batches)))
    assert all(b.started <= b.committed for b in run.batches)
    kills = [e for e in run.events if e.kind in (DRIVER_KILL, BROKER_KILL)]
    assert [e.kind for e in kills].count(DRIVER_KILL) == 2
    broker_kill = next(e.at for e in kills if e.kind == BROKER_KILL)
    commits = sorted(b.committed for b in run.batches)
    assert commits[0] < broker_kill < commits[-1]


def test_a_failed_check_says_so_and_lists_the_problems():
    run = recorded()
    run.summary = {**run.summary, "ok": False, "duplicates": 3,
                   "problems": ["3 duplicates: [4, 5, 6]"]}  # fmt: skip
    html = render_report(run)
    assert "exactly-once check FAILED: 3 duplicates: [4, 5, 6]" in html
    assert "exactly-once check PASSED" not in html


def test_a_run_in_progress_shows_its_phase():
    run = Timeline()
    run.add("phase", "pipeline")
    html = render_report(run)
    assert "running: pipeline" in html and "<table>" in html


def test_a_demo_that_stopped_early_says_where():
    """`run` writes the report of a demo whose step failed: no check, the failure as phase."""
    run = Timeline()
    run.add("phase", "failed: cannot reach 127.0.0.1:1")
    run.finished = run.started + 1
    html = render_report(run)
    assert "the demo stopped before its check: failed: cannot reach 127.0.0.1:1" in html
    assert 'class="verdict failed"' in html


def _offsets_file(path: Path, started_ms: int, ends: dict[int, int]) -> None:
    """An `offsets/N` entry as Spark writes it for the onceflow source."""
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": started_ms, "conf": {}}
    source = {"orders": {str(p): o for p, o in ends.items()}, "@topicIds": {"orders": "x"}}
    path.write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(source)}")


def test_read_batches_takes_starts_ends_and_commit_times_from_the_checkpoint(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    ends = [{0: 100, 1: 90}, {0: 150, 1: 200}, {0: 300, 1: 300}]
    for batch_id, batch_ends in enumerate(ends):
        _offsets_file(tmp_path / "offsets" / str(batch_id), 1_000_000 + batch_id * 1000, batch_ends)
    for batch_id in (0, 1):  # batch 2 is planned, not committed
        commit = tmp_path / "commits" / str(batch_id)
        commit.write_text('v1\n{"nextBatchWatermarkMs":0}')
        os.utime(commit, (1_000.5 + batch_id, 1_000.5 + batch_id))
    (tmp_path / "commits" / ".0.crc").write_text("")
    batches = read_batches(tmp_path)
    assert [(b.batch_id, b.started, b.committed, b.input_offsets) for b in batches] == [
        (0, 1000.0, 1000.5, 190),
        (1, 1001.0, 1001.5, 160),
    ]
    assert batches[1].end_offsets == {"orders-0": 150, "orders-1": 200}
    assert read_batches(tmp_path / "missing") == []


def test_console_demo_page_draws_the_run():
    from starlette.testclient import TestClient

    from onceflow.cli.demo_console import DemoConsole

    run = recorded()
    app = DemoConsole("127.0.0.1:1", run).app()  # /demo needs no cluster
    with TestClient(app) as client:
        page = client.get("/demo")
        assert page.status_code == 200
        assert "<nav>" in page.text and "driver SIGKILL" in page.text
        partial = client.get("/demo?partial=1")
        assert partial.text.startswith("<h1>Demo</h1>") and "<nav>" not in partial.text
        data = client.get("/api/demo").json()
        assert data["summary"]["ok"] is True and len(data["batches"]) == len(run.batches)


def test_demo_link_in_the_navigation_only_with_the_demo_mounted():
    from starlette.testclient import TestClient

    from onceflow.cli.demo_console import DemoConsole
    from onceflow.console.app import create_app

    demo_link = '<a href="/demo">Demo</a>'
    # a 400 page is drawn before the cluster (none here) is asked anything
    with TestClient(DemoConsole("127.0.0.1:1", recorded()).app()) as client:
        assert demo_link in client.get("/demo").text
        bad = client.get("/transactions?page=0")
        assert bad.status_code == 400 and demo_link in bad.text
    with TestClient(create_app({"bootstrap.servers": "127.0.0.1:1"})) as client:
        bad = client.get("/transactions?page=0")
        assert bad.status_code == 400 and "/demo" not in bad.text
