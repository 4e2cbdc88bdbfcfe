"""`onceflow demo`: the embedded-broker round trip passes, and failures are one clear line."""

from __future__ import annotations

import subprocess
import sys


def test_demo_round_trip_passes():
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "demo", "--records", "3000"],
        capture_output=True,
        timeout=180,
    )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()
    assert "3000 records of 1024 B over 3 partitions" in out
    assert "produce (confluent-kafka, acks=all)" in out and "MB/s" in out
    assert "exactly-once check passed" in out


def test_demo_failure_is_one_line_and_exit_1(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "demo", "--data-dir", str(blocker / "data")],
        capture_output=True,
        timeout=60,
    )
    err = result.stderr.decode()
    assert result.returncode == 1
    assert err.startswith("onceflow demo: ") and err.count("\n") == 1, err


def test_demo_rejects_bad_arguments():
    result = subprocess.run(
        [sys.executable, "-m", "onceflow", "demo", "--records", "0"],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert b"--records >= 1" in result.stderr
