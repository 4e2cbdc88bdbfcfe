"""Usage and start-up errors of the command line: one clear line (or the sub-command's usage)
and the right exit code, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest


def onceflow(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onceflow", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["broker", "--bogus"], "usage: onceflow broker "),
        (["topics", "create", "--topic", "t", "--bogus"], "usage: onceflow topics create "),
        (["groups", "list", "--bogus"], "usage: onceflow groups list "),
        (["consume", "t", "extra-arg"], "usage: onceflow consume "),
        (["--bogus"], "usage: onceflow "),
    ],
)
def test_unknown_arguments_show_the_sub_commands_usage(argv, usage):
    done = onceflow(*argv)
    assert done.returncode == 2
    assert done.stderr.startswith(usage)
    assert "unrecognized arguments" in done.stderr
    assert "Traceback" not in done.stderr


def test_config_file_that_is_not_utf8(tmp_path):
    config = tmp_path / "broker.properties"
    config.write_bytes(b"num.partitions=3\nfoo=\xff\xfe\n")
    done = onceflow("broker", "--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"onceflow broker: config file {config} is not UTF-8 text (byte 0xff at offset 21)"
    )


def test_data_dir_that_is_a_file(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    done = onceflow("broker", "--data-dir", str(path))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"onceflow broker: data directory {path} exists and is not a directory"
    )


def test_log_level_in_any_case_and_utc_timestamps(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "onceflow", "broker", "--data-dir", str(tmp_path / "d"),
         "--listen", "127.0.0.1:0", "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout.readline().startswith("onceflow broker ready on ")
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    first = err.splitlines()[0]
    stamp = first.split(" ", 1)[0]  # e.g. 2026-11-23T19:11:04.795Z
    assert stamp.endswith("Z") and "T" in stamp and len(stamp) == 24, first


def test_topics_create_with_a_bad_number_explains_it(broker):
    done = onceflow(
        "topics", "create", "--bootstrap-server", broker.bootstrap, "--topic", "t",
        "--config", "retention.ms=abc",
    )  # fmt: skip
    assert done.returncode == 1
    assert "invalid value for retention.ms: 'abc' is not a whole number" in done.stderr
    assert "invalid literal" not in done.stderr
