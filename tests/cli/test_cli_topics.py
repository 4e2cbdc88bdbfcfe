"""`onceflow topics create|list|describe|delete` against a live broker.

Most cases call the CLI's `main()` in-process (fast, output captured); one runs the installed
`python -m onceflow` to check real exit codes and stderr.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from onceflow.cli.main import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_create_list_describe_delete(broker, capsys):
    b = ("--bootstrap-server", broker.bootstrap)
    code, out, err = _run(
        capsys,
        "topics",
        "create",
        *b,
        "--topic",
        "orders",
        "--partitions",
        "3",
        "--config",
        "retention.ms=60000",
    )
    assert (code, out, err) == (0, 'Created topic "orders".\n', "")

    code, out, _ = _run(capsys, "topics", "list", *b)
    assert code == 0 and "orders" in out.splitlines()

    code, out, _ = _run(capsys, "topics", "describe", *b, "--topic", "orders")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Topic: orders\tPartitionCount: 3\tReplicationFactor: 1")
    assert [line.split("\t")[2] for line in lines[1:]] == [
        "Partition: 0",
        "Partition: 1",
        "Partition: 2",
    ]
    assert all("LogStartOffset: 0\tLogEndOffset: 0" in line for line in lines[1:])

    code, out, err = _run(capsys, "topics", "delete", *b, "--topic", "orders")
    assert (code, out, err) == (0, 'Deleted topic "orders".\n', "")
    code, out, _ = _run(capsys, "topics", "list", *b)
    assert "orders" not in out.splitlines()


def test_delete_records_like_kafka_delete_records_sh(broker, capsys, tmp_path):
    from confluent_kafka import Producer

    b = ("--bootstrap-server", broker.bootstrap)
    assert _run(capsys, "topics", "create", *b, "--topic", "logs", "--partitions", "2")[0] == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("logs", b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    spec = tmp_path / "offsets.json"
    spec.write_text(
        '{"partitions": [{"topic": "logs", "partition": 0, "offset": 3},'
        ' {"topic": "logs", "partition": 1, "offset": 9}], "version": 1}'
    )
    code, out, _ = _run(capsys, "topics", "delete-records", *b, "--offset-json-file", str(spec))
    assert code == 1
    assert out.splitlines() == [
        "Executing records delete operation",
        "Records delete operation completed:",
        "partition: logs-0\tlow_watermark: 3",
        "partition: logs-1\terror: OFFSET_OUT_OF_RANGE",
    ]
    code, out, _ = _run(capsys, "topics", "delete-records", *b, "--topic", "logs")
    assert code == 0
    assert out.splitlines()[2:] == [
        "partition: logs-0\tlow_watermark: 5",
        "partition: logs-1\tlow_watermark: 5",
    ]
    code, out, _ = _run(capsys, "topics", "describe", *b, "--topic", "logs")
    assert all("LogStartOffset: 5\tLogEndOffset: 5" in line for line in out.splitlines()[1:])
    spec.write_text(
        '{"partitions": [{"topic": "logs", "partition": 0, "offset": 3},'
        ' {"topic": "logs", "partition": 0, "offset": 4}], "version": 1}'
    )
    code, _, err = _run(capsys, "topics", "delete-records", *b, "--offset-json-file", str(spec))
    assert code == 1
    assert "Offset json file contains duplicate topic partitions: logs-0" in err


def test_errors_print_one_line_and_exit_non_zero(broker, capsys):
    b = ("--bootstrap-server", broker.bootstrap)
    assert _run(capsys, "topics", "create", *b, "--topic", "dup", "--partitions", "1")[0] == 0

    code, out, err = _run(capsys, "topics", "create", *b, "--topic", "dup")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "TOPIC_ALREADY_EXISTS" in err and "'dup'" in err
    assert _run(capsys, "topics", "create", *b, "--topic", "dup", "--if-not-exists")[0] == 0

    code, _, err = _run(capsys, "topics", "create", *b, "--topic", "zero", "--partitions", "0")
    assert code == 1 and "INVALID_PARTITIONS" in err and err.count("\n") == 1

    code, _, err = _run(capsys, "topics", "create", *b, "--topic", "x", "--config", "nonsense")
    assert code == 1 and "bad --config 'nonsense'" in err

    code, _, err = _run(capsys, "topics", "delete", *b, "--topic", "missing")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and err.count("\n") == 1
    assert _run(capsys, "topics", "delete", *b, "--topic", "missing", "--if-exists")[0] == 0

    code, _, err = _run(capsys, "topics", "describe", *b, "--topic", "missing")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err and err.count("\n") == 1


def test_unreachable_broker_is_one_line_and_exit_1(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    code, out, err = _run(capsys, "topics", "list", "--bootstrap-server", f"127.0.0.1:{port}")
    assert code == 1 and out == ""
    assert err.startswith(f"onceflow topics: cannot reach 127.0.0.1:{port}")
    assert err.count("\n") == 1


def test_missing_action_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["topics"])
    assert exc.value.code == 2


def test_real_command_exit_codes(broker):
    cmd = [sys.executable, "-m", "onceflow", "topics"]
    b = ["--bootstrap-server", broker.bootstrap]
    ok = subprocess.run(cmd + ["create", *b, "--topic", "real"], capture_output=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    again = subprocess.run(cmd + ["create", *b, "--topic", "real"], capture_output=True, timeout=60)
    assert again.returncode == 1
    lines = again.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("onceflow topics: cannot create topic 'real': TOPIC_ALREADY_EXISTS")


def test_describe_shows_the_cleaning_of_compacted_partitions(broker_factory, capsys):
    """A real broker's cleaner task compacts a topic; `describe --metrics-url` shows it."""
    from confluent_kafka import Producer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        metrics_port = probe.getsockname()[1]
    broker = broker_factory(
        {
            "onceflow.metrics.listener": f"127.0.0.1:{metrics_port}",
            "log.cleaner.backoff.ms": 100,
            "log.cleaner.min.cleanable.ratio": "0.01",
        }
    )
    b = ("--bootstrap-server", broker.bootstrap)
    url = ("--metrics-url", f"http://127.0.0.1:{metrics_port}/metrics")
    code, _, _ = _run(
        capsys, "topics", "create", *b, "--topic", "table", "--partitions", "1",
        "--config", "cleanup.policy=compact", "--config", "segment.bytes=2000",
    )  # fmt: skip
    assert code == 0
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(400):
        producer.produce("table", key=b"key-%d" % (i % 5), value=b"value-%05d" % i)
        producer.flush()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        code, out, _ = _run(capsys, "topics", "describe", *b, *url, "--topic", "table")
        if "LastCleaned: never" not in out:
            break
        time.sleep(0.2)
    line = out.splitlines()[1]
    assert "\tDirtyRatio: " in line and "\tLastCleaned: 20" in line, out
    code, out, _ = _run(capsys, "topics", "describe", *b, "--topic", "table")
    assert "DirtyRatio" not in out  # only with --metrics-url
    assert "cleaned table-0: offsets 0-" in broker.log_text()
    nowhere = f"http://127.0.0.1:{metrics_port + 1 if metrics_port < 65535 else 1}/metrics"
    code, out, err = _run(capsys, "topics", "describe", *b, "--metrics-url", nowhere)
    assert code == 1 and err.count("\n") == 1  # one line, no traceback
    assert f"onceflow topics: {nowhere} did not answer" in err
