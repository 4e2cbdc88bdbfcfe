"""`onceflow demo`: the Spark pipeline with every fault passes its exactly-once check; bad
arguments are usage errors; failures are one clear line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest


@pytest.mark.slow
def test_demo_with_all_faults_is_exactly_once(tmp_path):
    """Short run: the driver SIGKILLed twice, the broker kill -9'd once, then the check; the
    console serves the demo's progress meanwhile and the HTML report names what happened."""
    report = tmp_path / "demo.html"
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "onceflow", "demo", "--records", "2000", "--faults", "all",
         "--report", str(report), "--console", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    phases = _watch_demo_console(proc, port)
    stdout, stderr = proc.communicate(timeout=600)
    out = stdout.decode()
    assert proc.returncode == 0, out + stderr.decode()
    assert {"feed", "pipeline"} <= phases, phases  # seen live on /api/demo
    _check_report(report.read_text(), passed=True)
    assert "SIGKILLed at task.midway@1" in out
    assert "SIGKILLed at driver.between_commits@2" in out
    assert "the broker was kill -9'd and restarted" in out
    for line in (
        "duplicates:                    0",
        "missing:                       0",
        "aborted input seen in output:  0",
        "open transactions left:        none",
        "input orders (committed):      2000",
        "output records:                2000",
    ):
        assert line in out, out
    assert "exactly-once check PASSED" in out


@pytest.mark.slow
@pytest.mark.kafka
def test_demo_on_a_3_node_kafka_cluster_is_exactly_once(kafka_clusters):
    """`--bootstrap` at Apache Kafka (3 nodes, transaction version 2, topics replicated 3
    ways with min.insync.replicas=2): the driver SIGKILLed twice, then the check passes."""
    cluster = kafka_clusters.get(3, 2)
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "demo", "--records", "1500", "--faults", "driver",
         "--bootstrap", cluster.bootstrap],
        capture_output=True, timeout=900,
    )  # fmt: skip
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    assert "SIGKILLed at task.midway@1" in out
    assert "duplicates:                    0" in out and "missing:                       0" in out
    assert "open transactions left:        none" in out
    assert "exactly-once check PASSED" in out
    described = cluster.metadata().topics
    demo_topics = [t for name, t in described.items() if not name.startswith("__")]
    assert demo_topics and all(
        len(p.replicas) == 3 for t in demo_topics for p in t.partitions.values()
    )


def _free_port() -> int:
    with socket.socket() as s:  # a port nobody listens on (yet)
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _watch_demo_console(proc: subprocess.Popen, port: int) -> set[str]:
    """The phases /api/demo reported while `proc` ran (current, and passed ones from its
    events), and checks that the console's own pages answer against the demo's broker."""
    phases: set[str] = set()
    pages_ok = False
    while proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/demo", timeout=5) as r:
                demo = json.load(r)
            # the current phase, and those already passed (a short feed can end between polls)
            phases.add(demo["phase"])
            phases.update(e["text"] for e in demo["events"] if e["kind"] == "phase")
            if not pages_ok:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/overview", timeout=30
                ) as r:
                    overview = json.load(r)
                # the embedded broker's metrics too (its listener given to the console)
                metrics = overview["broker_metrics"]
                pages_ok = {"orders", "orders-validated"} <= {
                    t["topic"] for t in overview["topics"]
                } and (metrics["error"] is None and metrics["requests"] > 0)
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/demo", timeout=5) as r:
                    assert "<svg" in r.read().decode()
        except OSError:  # not listening yet, the broker being restarted, or stopped
            pass
        time.sleep(1)
    assert pages_ok
    return phases


def _check_report(html: str, passed: bool) -> None:
    """The report names both driver kills, the broker kill and the check's result, and loads
    nothing from elsewhere."""
    assert "driver SIGKILL" in html and "SIGKILLed at task.midway@1" in html
    assert "SIGKILLed at driver.between_commits@2" in html
    assert "broker kill -9" in html and "kill -9 of the broker" in html
    assert ("exactly-once check PASSED" in html) == passed
    assert "<script src" not in html and "<link" not in html and "@import" not in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_demo_unreachable_bootstrap_is_one_line_and_exit_1():
    port = _free_port()
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "demo", "--bootstrap", f"127.0.0.1:{port}",
         "--faults", "none"],
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    err = result.stderr.decode()
    assert result.returncode == 1
    assert err.startswith("onceflow demo: ") and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--records", "0"], b"--records >= 100"),
        (["--bootstrap", "127.0.0.1:1", "--faults", "broker"], b"need the embedded broker"),
        (["--faults", "bogus"], b"invalid choice"),
        (["--console", "8080"], b"expected HOST:PORT"),
    ],
)
def test_demo_rejects_bad_arguments(args, message):
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "demo", *args], capture_output=True, timeout=60
    )
    assert result.returncode == 2
    assert message in result.stderr


def test_demo_help_explains_what_it_shows():
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "demo", "--help"], capture_output=True, timeout=60
    )
    out = result.stdout.decode()
    assert result.returncode == 0
    assert "SIGKILLs the driver" in out and "read_committed" in out and "--faults" in out


def _processes_mentioning(text: str) -> list[str]:
    # -ww: full command lines (ps cuts them at $COLUMNS otherwise, and pytest sets COLUMNS)
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


def _demo_with_driver_running() -> tuple[subprocess.Popen, str]:
    """`onceflow demo` started and waited for until its broker and Spark driver both run;
    (the process, its temp directory)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "onceflow", "demo", "--records", "2000", "--faults", "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    workdir = None
    try:
        for line in proc.stdout:
            if "driver output in " in line:
                workdir = line.split("driver output in ", 1)[1].split("/driver.log")[0]
            if "driver run 1: starting" in line:
                break
        assert workdir is not None
        # keep reading: a demo blocked writing to a full pipe would not stop on SIGTERM
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        deadline = time.monotonic() + 60
        while len(_processes_mentioning(workdir)) < 2:  # the broker and the driver
            assert time.monotonic() < deadline, _processes_mentioning(workdir)
            time.sleep(0.2)
    except BaseException:
        proc.kill()
        raise
    return proc, workdir


def _wait_until_gone(workdir: str) -> None:
    deadline = time.monotonic() + 60
    while _processes_mentioning(workdir) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_mentioning(workdir) == []


@pytest.mark.slow
def test_sigterm_stops_the_driver_and_the_broker_and_cleans_up():
    """Issue 8: SIGTERM while the Spark driver runs leaves no broker, driver or temp dir."""
    proc, workdir = _demo_with_driver_running()
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        proc.kill()
    _wait_until_gone(workdir)
    assert not os.path.exists(workdir)


@pytest.mark.slow
def test_sigkill_of_the_demo_takes_its_broker_and_driver_down():
    """Issue 8: even when `onceflow demo` itself is SIGKILLed (no cleanup of its own runs),
    its broker and Spark driver do not stay behind as orphans."""
    proc, workdir = _demo_with_driver_running()
    try:
        proc.kill()
        proc.wait(timeout=30)
    finally:
        proc.kill()
    _wait_until_gone(workdir)
    shutil.rmtree(workdir, ignore_errors=True)  # nobody was left to remove it


def test_a_failed_demo_keeps_its_work_directory_and_says_where(capsys):
    """The error names logs inside the work directory, so a failure must not delete it."""
    from onceflow.cli.main import main

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = main(
        ["demo", "--bootstrap", f"127.0.0.1:{port}", "--records", "100", "--faults", "none"]
    )
    err = capsys.readouterr().err
    assert code == 1 and "cannot reach" in err, err
    assert err.count("\n") == 1, err  # still one line
    kept = err.rsplit("data, checkpoint and logs kept in ", 1)[1].split(")")[0]
    try:
        assert os.path.isdir(kept)
    finally:
        shutil.rmtree(kept, ignore_errors=True)
