"""`onceflow broker` as a process: ready line, clean shutdown, restart, config errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(90)


def run_cli(*args, timeout=30):
    return subprocess.run(
        [sys.executable, "-m", "onceflow", "broker", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_bad_config_exits_2_with_a_clear_message(tmp_path):
    result = run_cli(
        "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "--set", "num.partitions=x"
    )
    assert result.returncode == 2
    assert "num.partitions: expected an integer" in result.stderr
    assert result.stdout == ""


def test_missing_data_dir_exits_2(tmp_path):
    result = run_cli("--listen", "127.0.0.1:0")
    assert result.returncode == 2 and "--data-dir" in result.stderr


def test_missing_config_file_exits_2(tmp_path):
    result = run_cli("--data-dir", str(tmp_path), "--config", str(tmp_path / "nope.properties"))
    assert result.returncode == 2 and "cannot read config file" in result.stderr


def test_ready_line_sigterm_clean_shutdown_and_restart(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data, {"some.unknown.key": "1"}, log_level="INFO")
    try:
        assert broker.port > 0
        first_port = broker.port
        assert "unknown config some.unknown.key ignored" in broker.log_text()
        assert broker.stop() == 0
        assert (data / ".clean_shutdown").exists()
        assert "stopped" in broker.log_text()
        cluster_id = (data / "meta.properties").read_text()
        broker.restart()
        assert broker.port == first_port
        assert (data / "meta.properties").read_text() == cluster_id
        assert not (data / ".clean_shutdown").exists()
        broker.restart(kill=True)
        assert broker.port == first_port
    finally:
        broker.stop()


def test_config_file_and_advertised_listener(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nnode.id=7\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onceflow",
            "broker",
            "--data-dir",
            str(tmp_path / "d"),
            "--listen",
            "127.0.0.1:0",
            "--advertised-listener",
            "broker.example:9999",
            "--config",
            str(props),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("onceflow broker ready on 127.0.0.1:")
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "broker 7 listening" in err and "advertised broker.example:9999" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_node_id_mismatch_refuses_the_data_dir(tmp_path):
    data = tmp_path / "d"
    with BrokerProcess(data):
        pass
    result = run_cli("--data-dir", str(data), "--listen", "127.0.0.1:0", "--set", "node.id=5")
    assert result.returncode == 2
    assert "does not match configured node.id 5" in result.stderr
    assert "Traceback" not in result.stderr
    assert os.path.exists(data / "meta.properties")
