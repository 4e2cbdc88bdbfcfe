"""The source and sink from Spark Connect sessions (`SparkSession.builder.remote`) against a
Spark Connect server the test starts from the installed pyspark: registration without a
SparkContext, options, the demo pipeline crash-free and with the server (the Spark driver)
SIGKILLed between the commits of a batch, and spark.speculation=true still refused.

The clients run as processes of their own (connect_client.py, the pipeline with --remote):
a Python process that has a classic SparkContext cannot open a Connect session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.spark_daemons import ConnectServer
from support.topics import create_topics

from onceflow.client.producer import Producer
from onceflow.spark.orders import read_committed
from spark.pipeline_helpers import DRIVER_TIMEOUT_S, Pipeline, assert_exactly_once, output_problems

pytestmark = pytest.mark.slow

CLIENT = Path(__file__).with_name("connect_client.py")


class Servers:
    """The module's Connect server; a test that kills it starts the next one."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.current: ConnectServer | None = None
        self.started = 0

    def server(self) -> ConnectServer:
        if self.current is None:
            self.started += 1
            self.current = ConnectServer(self.workdir / f"server-{self.started}")
        return self.current

    def kill(self) -> None:
        if self.current is not None:
            self.current.kill()
            self.current = None


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    holder = Servers(tmp_path_factory.mktemp("connect"))
    yield holder
    holder.kill()


def _client(*args: str) -> tuple[int, dict]:
    result = subprocess.run(
        [sys.executable, str(CLIENT), *args], capture_output=True, timeout=300, text=True
    )
    lines = result.stdout.strip().splitlines()
    assert lines, result.stderr[-3000:]
    return result.returncode, json.loads(lines[-1])


def test_registration_and_options(servers, module_broker):
    bootstrap = module_broker.bootstrap
    create_topics(bootstrap, ["connect-in", "connect-out"], 2)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(6):
            producer.send("connect-in", b"v%d" % i, partition=0, headers=[("h", b"%d" % i)])
        producer.flush(30)
    url = servers.server().url
    code, report = _client("register", url)
    assert code == 0 and report["registered"].startswith("pyspark.sql.connect"), report
    code, report = _client("batch", url, bootstrap, "connect-in", "connect-out")
    assert code == 0, report
    assert report["rows"] == [[0, o, f"v{o}", [["h", str(o)]]] for o in (1, 2, 3)]
    assert "Option 'deliveryGuarantee' must be exactly_once or at_least_once" in str(
        report["bad_option"]
    )
    written = read_committed(bootstrap, "connect-out", 2)
    assert sorted(bytes(r.value) for r in written) == [b"v1", b"v2", b"v3"]


def test_pipeline_and_a_driver_crash(servers, module_broker, tmp_path):
    """The demo pipeline on the Connect server: a crash-free run, then a run whose server is
    SIGKILLed after the first of a batch's transactions was committed, then a run on a new
    server. The output holds every committed order exactly once."""
    p = Pipeline(module_broker.bootstrap, tmp_path, input="c-orders", output="c-validated")
    p.create_topics()
    p.feed(300)
    outcome = p.run("--remote", servers.server().url)
    assert outcome.exit_code == 0, (outcome, p.log_tail())
    assert_exactly_once(p)

    p.feed(900)
    crash = "driver.between_commits@2"
    driver = p.driver("--remote", servers.server().url, "--max-offsets-per-trigger", "300",
                      faults=crash)  # fmt: skip

    def kill_server_at_fault() -> None:
        if servers.current is not None and any(
            not f.name.startswith(".") for f in p.faults_dir.iterdir()
        ):
            servers.kill()  # the Spark driver dies first, then the client and hung worker

    outcome = driver.wait(DRIVER_TIMEOUT_S, on_tick=kill_server_at_fault)
    # the commit pool reports the task partition whose commit it held back: "@2:<p>"
    assert outcome.fault is not None and outcome.fault.startswith(crash), (outcome, p.log_tail())
    assert servers.current is None
    records = read_committed(p.bootstrap, p.output, p.partitions)
    assert not output_problems(records, p.committed_ids, complete=False)
    assert p.committed_batches() == 2  # batch 2 was never recorded as done

    outcome = p.run("--remote", servers.server().url)
    assert outcome.exit_code == 0, (outcome, p.log_tail())
    assert p.committed_batches() > 3
    assert_exactly_once(p)


def test_speculation_is_refused(tmp_path):
    server = ConnectServer(tmp_path / "speculating", {"spark.speculation": "true"})
    try:
        code, report = _client("register", server.url)
    finally:
        server.kill()
    assert code == 3, report
    assert "spark.speculation=false" in report["refused"]
