"""The release artefacts: `python -m build` makes a wheel and an sdist, and the wheel alone,
installed into a fresh virtual environment, runs the console script and a small Spark job
(a batch write through the exactly-once sink and a read back) against a broker it starts.

The fresh environment gets onceflow from the wheel only; its third-party dependencies
(pyspark, pyarrow, crc32c, ...) are borrowed from the test environment's site-packages through
a path file, so the test needs no network and checks what the wheel itself carries."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

JOB = textwrap.dedent(
    """
    import os, sys
    import onceflow
    assert "fresh" in onceflow.__file__, onceflow.__file__  # the wheel, not the checkout
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from onceflow.testing import embedded_broker, spark_session

    with embedded_broker() as broker, spark_session("local[1]") as spark:
        broker.create_topic("packaged", partitions=2)
        df = spark.range(50).selectExpr("cast(id as string) as value")
        df.write.format("onceflow").mode("append").option(
            "kafka.bootstrap.servers", broker.bootstrap).option("topic", "packaged").save()
        rows = spark.read.format("onceflow").option(
            "kafka.bootstrap.servers", broker.bootstrap).option("subscribe", "packaged").load()
        got = sorted(int(bytes(r.value)) for r in rows.collect())
        assert got == list(range(50)), got
        print("packaged job ok")
    """
)


def test_wheel_and_sdist_build_and_the_wheel_runs_a_spark_job(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = dist.glob("onceflow-*.whl")
    assert len(list(dist.glob("onceflow-*.tar.gz"))) == 1
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        points = z.read(entry_points).decode()
    assert "onceflow/protocol/messages/produce.py" in names
    assert "onceflow = onceflow.cli.main:main" in points
    assert "onceflow = onceflow.testing.pytest_plugin" in points

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    fresh_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(fresh_site) / "borrowed-dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    script = venv / "bin" / "onceflow"
    assert subprocess.run([str(script), "--help"], capture_output=True, timeout=60).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), "-c", JOB], capture_output=True, text=True, timeout=600, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "packaged job ok" in done.stdout
