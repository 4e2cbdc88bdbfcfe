"""`onceflow demo --master spark://...` on a real standalone Spark cluster: a master and two
workers started from the installed pyspark on loopback (the recipe in docs/spark.md). The
executors are JVMs of their own, launched by the workers; the demo SIGKILLs the driver twice
and the broker once, and checks the output exactly once."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.spark_daemons import StandaloneCluster, spark_env

pytestmark = pytest.mark.slow


def test_demo_on_a_standalone_cluster(tmp_path):
    cluster = StandaloneCluster(tmp_path / "cluster", workers=2)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "onceflow", "demo", "--records", "2000", "--faults", "all",
             "--master", cluster.url],
            capture_output=True,
            timeout=900,
            env=spark_env(),
        )  # fmt: skip
        launched = [w.log_text().count("Asked to launch executor") for w in cluster.workers]
    finally:
        cluster.stop()
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()[-3000:]
    assert "SIGKILLed at task.midway@1:0" in out
    assert "SIGKILLed at driver.between_commits@2" in out
    assert "the broker was kill -9'd and restarted" in out
    for line in (
        "duplicates:                    0",
        "missing:                       0",
        "output records:                2000",
        "open transactions left:        none",
    ):
        assert line in out, out  # fmt: skip
    assert "exactly-once check PASSED" in out
    assert all(n >= 1 for n in launched), launched  # both workers ran executors
