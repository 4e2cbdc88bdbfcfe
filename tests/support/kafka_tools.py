"""Running Apache Kafka's own command-line tools (the classes behind `kafka-*.sh`) in tests.

`run_tool(main_class, *args)` runs one tool class with the fetched jars
(`support.kafka_cluster.java_command`) and returns its exit code, stdout and stderr; the JVM
starts with a quick-start profile (C1 only, serial GC) and a log4j2 configuration that sends
WARN and above to stderr, so stdout holds only the tool's own output. `start_tool` is the same
as a child process, for tools that run while a test acts (the transactional message copier).
`tab_rows` and `column_rows` parse the two table styles the tools print: tab-separated
(kafka-transactions, kafka-topics) and space-aligned under a header (kafka-consumer-groups).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from support.kafka_cluster import java_command

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


def tool_command(main_class: str, *args: str) -> list[str]:
    """argv running one of Kafka's tool classes quietly (log4j to stderr, WARN and above)."""
    global _log4j_path
    if _log4j_path is None:
        path = Path(tempfile.gettempdir()) / "onceflow-kafka-tools-log4j2.yaml"
        path.write_text(TOOL_LOG4J2)
        _log4j_path = path
    heap = [*QUICK_JVM, f"-Dlog4j2.configurationFile={_log4j_path}"]
    return java_command(main_class, *args, heap=heap)


def run_tool(
    main_class: str, *args: str, stdin: str | None = None, timeout: float = TOOL_TIMEOUT_S
) -> ToolRun:
    """Run a tool class to its end; does not raise on a non-zero exit (see `ToolRun.check`)."""
    argv = tool_command(main_class, *args)
    result = subprocess.run(
        argv,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )
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


def column_rows(text: str) -> list[dict[str, str]]:
    """Rows of every space-aligned table in `text` (a header line is one that starts with
    `GROUP` or `TOPIC`); cells hold no spaces in these tables."""
    rows: list[dict[str, str]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        cells = line.split()
        if not cells:
            header = None
        elif cells[0] in ("GROUP", "TOPIC"):
            header = cells
        elif header is not None:
            rows.append(dict(zip(header, cells, strict=True)))
    return rows
