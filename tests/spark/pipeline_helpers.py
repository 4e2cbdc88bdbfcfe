"""Helpers for the sink's crash tests: feed the demo's orders, run pipeline drivers that crash
at fault points, and check the output topic exactly once."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from support.kafka_cluster import KafkaCluster

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.spark.orders import check_output, end_offsets, feed_orders, read_committed
from onceflow.spark.supervisor import DriverProcess, Outcome

DRIVER_TIMEOUT_S = 240.0


@dataclass
class Pipeline:
    """One pipeline under test: topics, checkpoint, fault directory, driver log."""

    bootstrap: str
    workdir: Path
    input: str = "orders"
    output: str = "orders-validated"
    partitions: int = 3
    replication_factor: int = 1
    committed_ids: list[int] = field(default_factory=list)
    cluster: KafkaCluster | None = None  # set when the pipeline runs on Apache Kafka

    @property
    def checkpoint(self) -> Path:
        return self.workdir / "checkpoint"

    @property
    def faults_dir(self) -> Path:
        return self.workdir / "faults"

    @property
    def log(self) -> Path:
        return self.workdir / "driver.log"

    def create_topics(self) -> None:
        with AdminClient({"bootstrap.servers": self.bootstrap}) as admin:
            for name in (self.input, self.output):
                topic = NewTopic(name, self.partitions, self.replication_factor)
                result = admin.create_topics([topic])[name]
                assert result.ok, result

    def feed(self, count: int) -> None:
        """`count` committed orders (ids after those fed before), with aborted transactions
        between them."""
        first_id = max(self.committed_ids, default=-1) + 1
        result = feed_orders(self.bootstrap, self.input, count, txn_size=25, first_id=first_id)
        self.committed_ids.extend(result.committed_ids)

    def driver(self, *extra: str, faults: str = "", master: str = "local[2]") -> DriverProcess:
        args = [
            "--bootstrap", self.bootstrap, "--input", self.input, "--output", self.output,
            "--checkpoint", str(self.checkpoint), "--master", master,
            "--faults", faults, "--faults-dir", str(self.faults_dir), *extra,
        ]  # fmt: skip
        self.faults_dir.mkdir(parents=True, exist_ok=True)
        return DriverProcess(args, self.log, self.faults_dir)

    def run(self, *extra: str, faults: str = "", master: str = "local[2]") -> Outcome:
        return self.driver(*extra, faults=faults, master=master).wait(DRIVER_TIMEOUT_S)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def batch_end_offsets(self, batch: int) -> dict[int, int]:
        """The input end offsets of `batch` per partition, from the checkpoint's offset log."""
        lines = (self.checkpoint / "offsets" / str(batch)).read_text().splitlines()
        return {int(p): o for p, o in json.loads(lines[-1])[self.input].items()}

    def input_ids(self, start: dict[int, int], end: dict[int, int]) -> list[tuple[int, int]]:
        """(partition, order id) of the committed input orders in `[start, end)` per partition."""
        records = read_committed(self.bootstrap, self.input, self.partitions)
        return [
            (r.partition, int(r.key.decode().split("-")[1]))
            for r in records
            if start.get(r.partition, 0) <= r.offset < end.get(r.partition, 0)
        ]

    def output_ids(self) -> list[int]:
        records = read_committed(self.bootstrap, self.output, self.partitions)
        return [json.loads(r.value)["id"] for r in records]

    def committed_batches(self) -> int:
        """How many batches Spark has recorded as done (files in <checkpoint>/commits)."""
        commits = self.checkpoint / "commits"
        return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def read_output(bootstrap: str, topic: str, partitions: int) -> list:
    return read_committed(bootstrap, topic, partitions)


def output_problems(records: list, expected_ids: list[int], complete: bool = True) -> list[str]:
    return check_output(records, expected_ids, complete).problems()


def assert_exactly_once(pipeline: Pipeline) -> None:
    """The output holds every committed input order exactly once and no open transaction is
    left (LSO == high watermark on every output partition)."""
    records = read_output(pipeline.bootstrap, pipeline.output, pipeline.partitions)
    problems = output_problems(records, pipeline.committed_ids)
    assert not problems, problems
    lso = end_offsets(pipeline.bootstrap, pipeline.output, pipeline.partitions, True)
    hw = end_offsets(pipeline.bootstrap, pipeline.output, pipeline.partitions, False)
    assert lso == hw, f"open transactions left on the output: LSO {lso} != HW {hw}"
