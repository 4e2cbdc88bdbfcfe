"""Benchmarks are not run by the suite, but they must not rot: each one listed here runs once
with tiny sizes, in a child process as a user would start it, and must exit 0 and append one
well-formed result. No figure is checked (tests never assert timings)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(180)


def run_bench(script: str, out: Path, *args: str) -> dict:
    """Run bench/`script` with `args` and `--out out`; the one result it appended."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench")])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args, "--out", str(out)],
        capture_output=True,
        timeout=170,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    runs = json.loads(out.read_text())
    assert len(runs) == 1
    return runs[0]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_security_throughput(tmp_path):
    run = run_bench(
        "security_throughput.py", tmp_path / "security.json",
        "--rounds", "1", "--bytes", "1MiB", "--acls", "300",
    )  # fmt: skip
    assert set(run["ratios"]) == {"sasl_ssl_produce", "sasl_ssl_consume", "acls_produce"}
    assert run["config"]["acls"] == 300
    assert run["tls"]["python_ssl"]["version"] in ("TLSv1.2", "TLSv1.3")
    assert run["tls"]["librdkafka"]["cipher"] == run["tls"]["python_ssl"]["cipher"]
    assert run["authorization"]["produce_requests_per_mb"] > 0  # the broker's metrics were read


TINY = {
    "acl_lookup.py": ["--acls", "100", "--requests", "200", "--rounds", "1"],
    "sasl_login_cost.py": ["--logins", "3", "--rounds", "1"],
    "broker_throughput.py": ["--bytes", "1MiB", "--seconds", "20"],
    "client_throughput.py": ["--records", "500", "--rounds", "1"],
    "client_txn_throughput.py": ["--records", "500", "--rounds", "1"],
    "console_scale.py": ["--topics", "3", "--partitions", "2", "--txn-ids", "30", "--rounds", "1"],
    "spark_eos.py": ["--records", "2000", "--source-records", "3000", "--rounds", "1"],
    "security_side_by_side.py": ["--rounds", "1", "--bytes", "1MiB"],
    "spark_vs_builtin.py": ["--records", "3000", "--rounds", "1", "--per-trigger", "1500"],
    "spark_sink_scale.py": ["--tasks", "2", "4", "--batches", "3", "--rounds", "1"],
    "spark_reuse.py": [
        "--records",
        "1200",
        "--per-trigger",
        "600",
        "--small",
        "150",
        "--small-batches",
        "2",
        "--batches",
        "3",
        "--task-rows",
        "20",
        "--rounds",
        "1",
    ],  # fmt: skip
    "idempotence_cost.py": ["--rounds", "1", "--bytes", "1MiB", "--micro-repeats", "1"],
    "kafka_side_by_side.py": ["--rounds", "1", "--seconds", "1"],
    "log_cleaner.py": [
        "--commits",
        "3000",
        "--transactions",
        "300",
        "--keys",
        "100",
        "--bytes",
        "1MiB",
        "--rounds",
        "1",
        "--paired",
        "child",
        "burn10",
        "--slice",
        "0.2",
        "--paired-limit",
        "2",
    ],  # fmt: skip
    "source_compare.py": ["--rounds", "1", "--batches", "20", "--txn-cycles", "5"]
    + ["--bytes", "1MiB", "--seconds", "10", "--before", str(ROOT)],
    "topic_compression.py": ["--rounds", "1", "--bytes", "1MiB"],
    "transactions_cost.py": ["--rounds", "1", "--seconds", "1"],
}


@pytest.mark.parametrize("script", sorted(TINY))
def test_bench_runs_with_tiny_sizes(tmp_path, script):
    run = run_bench(script, tmp_path / "result.json", *TINY[script])
    assert isinstance(run, dict) and run
