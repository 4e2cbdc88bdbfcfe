"""Running Apache Kafka's own command-line tools (the classes behind `kafka-*.sh`) in tests.

`run_tool(main_class, *args)` runs one tool class with the fetched jars
(`support.kafka_cluster.java_command`) and returns its exit code, stdout and stderr; the JVM
starts with a quick-start profile (C1 only, serial GC) and a log4j2 configuration that sends
WARN and above to stderr, so stdout holds only the tool's own output. `start_tool` is the same
as a child process, for tools that run while a test acts (the transactional message copier).
The first finished `run_tool` of a session also writes a class-data-sharing archive of the
classes it loaded (`-XX:ArchiveClassesAtExit`, into the temp directory, named after the jars);
later runs map it (`-XX:SharedArchiveFile`), which halves a tool's start-up CPU. A stale or
foreign archive is ignored by the JVM (`-Xshare:auto`), and JVM logging is off so no CDS
warning reaches a tool's stdout.
`tab_rows` and `column_rows` parse the two table styles the tools print: tab-separated
(kafka-transactions, kafka-topics) and space-aligned under a header (kafka-consumer-groups,
kafka-groups, kafka-cluster list-endpoints).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from support.broker import BrokerProcess
from support.kafka_cluster import java_command, kafka_libs

TOOL_TIMEOUT_S = 120.0
QUICK_JVM = ["-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k"]
TOOL_LOG4J2 = """Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDERR
"""
_log4j_path: Path | None = None

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
CONSUMER_GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
ACLS = "org.apache.kafka.tools.AclCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
MESSAGE_COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
BROKER_API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
CLUSTER = "org.apache.kafka.tools.ClusterTool"
GROUPS = "org.apache.kafka.tools.GroupsCommand"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
DUMP_LOG = "org.apache.kafka.tools.DumpLogSegments"
END_TO_END_LATENCY = "org.apache.kafka.tools.EndToEndLatency"
REASSIGN_PARTITIONS = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"
DELEGATION_TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"


@dataclass(frozen=True)
class ToolRun:
    """One finished tool run."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> ToolRun:
        """Self, or AssertionError naming the command and its output when it exited non-zero."""
        if self.returncode != 0:
            raise AssertionError(
                f"{' '.join(self.argv[-8:])} exited {self.returncode}\n"
                f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}"
            )
        return self


def _class_archive() -> Path:
    """Where the shared class archive of this set of jars lives (it may not exist yet)."""
    libs = kafka_libs()
    names = "\n".join(sorted(f"{p.name}:{p.stat().st_size}" for p in libs.glob("*.jar")))
    digest = hashlib.sha256(f"{libs}\n{names}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"onceflow-kafka-tools-{digest}.jsa"


def tool_command(main_class: str, *args: str, archive_to: Path | None = None) -> list[str]:
    """argv running one of Kafka's tool classes quietly (log4j to stderr, WARN and above),
    mapping the shared class archive when there is one, or writing one to `archive_to`."""
    global _log4j_path
    if _log4j_path is None:
        path = Path(tempfile.gettempdir()) / "onceflow-kafka-tools-log4j2.yaml"
        path.write_text(TOOL_LOG4J2)
        _log4j_path = path
    jvm = [*QUICK_JVM, "-Xshare:auto", "-Xlog:disable", f"-Dlog4j2.configurationFile={_log4j_path}"]
    archive = _class_archive()
    if archive_to is not None:
        jvm.append(f"-XX:ArchiveClassesAtExit={archive_to}")
    elif archive.exists():
        jvm.append(f"-XX:SharedArchiveFile={archive}")
    return java_command(main_class, *args, heap=jvm)


def run_tool(
    main_class: str, *args: str, stdin: str | None = None, timeout: float = TOOL_TIMEOUT_S
) -> ToolRun:
    """Run a tool class to its end; does not raise on a non-zero exit (see `ToolRun.check`)."""
    archive = _class_archive()
    draft = None if archive.exists() else archive.with_suffix(f".{os.getpid()}.tmp")
    argv = tool_command(main_class, *args, archive_to=draft)
    result = subprocess.run(
        argv,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if draft is not None and draft.exists():
        os.replace(draft, archive)  # whole or not at all, also with another session racing
    return ToolRun(argv, result.returncode, result.stdout, result.stderr)


def start_tool(main_class: str, *args: str, stdout_path: Path) -> subprocess.Popen[bytes]:
    """Start a tool class as a child process writing stdout to `stdout_path` (stderr too)."""
    with open(stdout_path, "ab") as out:
        return subprocess.Popen(
            tool_command(main_class, *args),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def tool(broker: BrokerProcess, main_class: str, *args: str, stdin: str | None = None) -> ToolRun:
    """`run_tool` with `--bootstrap-server` pointing at `broker` (not yet checked)."""
    return run_tool(main_class, "--bootstrap-server", broker.bootstrap, *args, stdin=stdin)


def watermarks(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
    """(log start offset, high watermark) of a partition, asked with confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def tab_rows(text: str) -> list[dict[str, str]]:
    """Rows of a tab-separated table (header first), cells stripped of their padding."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [cell.strip() for cell in lines[0].rstrip("\t").split("\t")]
    rows = []
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.rstrip("\t").split("\t")]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def column_rows(text: str, *headers: str) -> list[dict[str, str]]:
    """Rows of every space-aligned table in `text` (a header line is one that starts with
    `GROUP` or `TOPIC`, or one of `headers`); cells hold no spaces in these tables, and only a
    row's last cells may be empty (kafka-groups prints no protocol for a group that only has
    committed offsets)."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        cells = line.split()
        if not cells:
            header = None
        elif cells[0] in ("GROUP", "TOPIC", *headers):
            header = cells
        elif header is not None:
            if len(cells) > len(header):
                raise ValueError(f"more cells than columns: {line!r}")
            rows.append(dict(zip(header, cells + [""] * (len(header) - len(cells)), strict=True)))
    return rows
