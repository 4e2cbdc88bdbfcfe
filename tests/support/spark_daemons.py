"""Spark's own server processes, started from the installed pyspark on loopback: a Spark
Connect server, and a standalone cluster (a master and workers).

Each `SparkDaemon` is one JVM in a process group of its own (a standalone worker's executors
and a Connect server's Python workers are its children), its output in a log file; `kill()`
SIGKILLs the group, which is what a crash of its machine does. The environment gives Spark's
Python workers this interpreter and this PYTHONPATH, so they import the onceflow under test.
docs/spark.md describes the same commands for people.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from onceflow.process import child_options

START_TIMEOUT_S = 180.0  # a JVM start takes 10-25 s on a loaded 2-core machine
CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def spark_env() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "512m",
        "PYTHONUNBUFFERED": "1",
    }


class SparkDaemon:
    """One Spark JVM in its own process group, output appended to `log`."""

    def __init__(self, command: list[str], log: Path, what: str):
        self.log, self.what = log, what
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=spark_env(),
                start_new_session=True,
                **child_options(),
            )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until(self, ready: Callable[[], bool], timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            tail = "\n".join(self.log_text().splitlines()[-20:])
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.what} exited with {self.proc.returncode}:\n{tail}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"{self.what} not ready after {timeout:.0f}s:\n{tail}")
            time.sleep(0.25)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


class ConnectServer:
    """A Spark Connect server (`local[2]`) on a free loopback port; `url` is `sc://...`."""

    def __init__(self, workdir: Path, conf: dict[str, str] | None = None):
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        settings = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.python.authenticate.socketTimeout": "60s",
            **(conf or {}),
        }
        command = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER]
        command += ["--master", "local[2]", "--name", "onceflow-connect-test"]
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")  # the server is built in: no application jar
        self.daemon = SparkDaemon(command, workdir / "connect-server.log", "Spark Connect server")
        self.daemon.wait_until(lambda: listening(self.port))

    def kill(self) -> None:
        self.daemon.kill()


class StandaloneCluster:
    """A standalone master and `workers` workers (1 core, 1 GiB each) on loopback."""

    def __init__(self, workdir: Path, workers: int = 2):
        workdir.mkdir(parents=True, exist_ok=True)
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.master = SparkDaemon(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(self.port), "--webui-port", str(free_port())],
            workdir / "master.log",
            "Spark master",
        )  # fmt: skip
        self.workers: list[SparkDaemon] = []
        try:
            self.master.wait_until(lambda: listening(self.port))
            for i in range(workers):
                self.workers.append(
                    SparkDaemon(
                        [
                            spark_class,
                            "org.apache.spark.deploy.worker.Worker",
                            "--host",
                            "127.0.0.1",
                            "--cores",
                            "1",
                            "--memory",
                            "1g",
                            "--webui-port",
                            str(free_port()),
                            "--work-dir",
                            str(workdir / f"work-{i}"),
                            self.url,
                        ],
                        workdir / f"worker-{i}.log",
                        f"Spark worker {i}",
                    )  # fmt: skip
                )
            self.master.wait_until(
                lambda: self.master.log_text().count("Registering worker") >= workers
            )
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for daemon in [*self.workers, self.master]:
            daemon.kill()
