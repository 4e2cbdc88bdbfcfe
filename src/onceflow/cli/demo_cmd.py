"""`onceflow demo`: the exactly-once Spark pipeline on an embedded broker, crashed on purpose.

What it shows, step by step:

1. starts an embedded onceflow broker (or uses `--bootstrap HOST:PORT`, a onceflow or Apache
   Kafka cluster) and creates an input and an output topic;
2. feeds orders into the input topic in transactions, aborting every fifth transaction, so a
   reader that is not read_committed would see orders that never happened;
3. runs the consume-transform-produce job (`onceflow.spark.pipeline`: Spark Structured
   Streaming, onceflow source -> validate and enrich -> exactly-once onceflow sink) as a
   separate Spark driver process, SIGKILLs the driver at two different points of a
   micro-batch (while tasks write; after the driver committed some of a batch's transactions
   but not all), kill -9's the broker while a later batch is running, and restarts each from
   its checkpoint / data directory until the job has processed all input;
4. reads the output with a read_committed consumer and checks it: every committed order once,
   duplicates 0, missing 0, aborted input never seen, no transaction left open; prints the
   report and exits 1 if the check fails.
"""

from __future__ import annotations

import argparse
import math
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onceflow.cli import demo_timeline as tl
from onceflow.cli.embedded_broker import BrokerError, EmbeddedBroker
from onceflow.cli.namespace import Subparsers, from_args
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from onceflow.console.server import console_address

if TYPE_CHECKING:  # both are imported where they are used (the console extra is optional)
    from onceflow.cli.demo_console import DemoConsole
    from onceflow.spark.supervisor import DriverProcess

FAULT_MODES = ("none", "driver", "broker", "all")
# One task hangs at task.midway (partition 0), not all of them: on a cluster the other tasks run
# in executors the driver's death does not stop at once, and a late one's fault file would be
# taken for a crash of the next driver run.
DRIVER_FAULTS = ("task.midway@1:0", "driver.between_commits@2")
MAX_RESTARTS = 6


class DemoError(Exception):
    """A step of the demo failed; the message is the one line printed."""


@dataclass(frozen=True)
class DemoOptions:
    records: int
    faults: str
    bootstrap: str | None
    keep: bool
    partitions: int
    master: str
    timeout: float
    report: Path | None
    console: str | None


def add_parser(subparsers: Subparsers) -> None:
    """Register the `demo` sub-command."""
    parser = subparsers.add_parser(
        "demo",
        help="run the exactly-once Spark pipeline on an embedded broker, with crashes",
        description=__doc__.split("\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--records", type=int, default=20_000, help="orders to feed in")
    parser.add_argument(
        "--faults",
        choices=FAULT_MODES,
        default="all",
        help="driver: SIGKILL the Spark driver twice; broker: kill -9 the broker once; "
        "all (default): both",
    )
    parser.add_argument(
        "--bootstrap", help="use this onceflow or Kafka cluster instead of an embedded broker"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the data, checkpoint and logs, and say where"
    )
    parser.add_argument("--partitions", type=int, default=3, help="partitions of each topic")
    parser.add_argument(
        "--master",
        default="local[2]",
        help="Spark master of the driver: local[N], or spark://HOST:PORT for a standalone "
        "cluster on this machine (docs/spark.md)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds for each phase or driver run"
    )
    parser.add_argument(
        "--report",
        metavar="FILE.html",
        type=Path,
        help="write a self-contained HTML report: timeline of micro-batches and kills, "
        "counts, the exactly-once check",
    )
    parser.add_argument(
        "--console",
        metavar="HOST:PORT",
        help="serve the web console (onceflow console) against the demo's cluster while it "
        "runs, with the demo's progress at /demo; needs the console extra",
    )
    parser.set_defaults(func=run)


def run(namespace: argparse.Namespace) -> int:
    """Entry point of `onceflow demo`; returns the exit code."""
    args = from_args(DemoOptions, namespace)
    if args.records < 100 or args.partitions < 1:
        print("onceflow demo: need --records >= 100 and --partitions >= 1", file=sys.stderr)
        return 2
    if args.bootstrap and args.faults in ("broker", "all"):
        print("onceflow demo: --faults broker/all need the embedded broker", file=sys.stderr)
        return 2
    try:
        address = console_address(args.console) if args.console else None
    except ValueError as exc:
        print(f"onceflow demo: {exc}", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="onceflow-demo-"))
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    demo = Demo(args, workdir)
    demo.console_address = address
    keep = args.keep  # a failure keeps the work directory too: its error points at logs there
    try:
        report = demo.run()
        print(report.text(), flush=True)
        demo.write_report()
        if not report.ok:
            keep = True
            print(f"onceflow demo: data, checkpoint and logs kept in {workdir}", file=sys.stderr)
            return 1
        return 0
    except (DemoError, BrokerError, OSError, KafkaError, TimeoutError) as exc:
        keep = True
        demo.timeline.add(tl.PHASE, f"failed: {exc}")
        demo.write_report()
        print(f"onceflow demo: {exc} (data, checkpoint and logs kept in {workdir})",
              file=sys.stderr)  # fmt: skip
        return 1
    except KeyboardInterrupt:
        print("onceflow demo: interrupted", file=sys.stderr)
        return 130
    finally:
        demo.close()
        signal.signal(signal.SIGTERM, previous)
        if args.keep:
            print(f"onceflow demo: kept data, checkpoint and logs in {workdir}")
        elif not keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _exit_on_sigterm(_signum: int, _frame: Any) -> None:
    raise SystemExit(143)  # runs the finally blocks: the driver and broker are stopped


@dataclass
class Report:
    records: int = 0
    aborted_inputs: int = 0
    aborted_transactions: int = 0
    outputs: int = 0
    problems: list[str] = field(default_factory=list)
    duplicates: int = 0
    missing: int = 0
    aborted_seen: int = 0
    open_transactions: bool = False
    batches: int = 0
    driver_runs: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    pipeline_seconds: float = 0.0
    last_run_rows: int = 0  # the final driver run, by Spark's batch durations
    last_run_seconds: float = 0.0
    bootstrap: str = ""

    @property
    def ok(self) -> bool:
        return not self.problems and not self.open_transactions

    def text(self) -> str:
        rate = self.records / self.pipeline_seconds if self.pipeline_seconds else 0.0
        lines = [
            f"onceflow demo: exactly-once Spark pipeline via {self.bootstrap}",
            f"  input orders (committed):      {self.records}",
            f"  aborted input orders:          {self.aborted_inputs} "
            f"in {self.aborted_transactions} aborted transactions",
            f"  output records:                {self.outputs}",
            f"  duplicates:                    {self.duplicates}",
            f"  missing:                       {self.missing}",
            f"  aborted input seen in output:  {self.aborted_seen}",
            f"  open transactions left:        {'yes' if self.open_transactions else 'none'}",
            f"  micro-batches committed:       {self.batches}",
            f"  driver runs:                   {len(self.driver_runs)}",
        ]
        lines += [f"    {i + 1}. {outcome}" for i, outcome in enumerate(self.driver_runs)]
        lines.append(
            f"  throughput (incl. restarts):   {rate:,.0f} orders/s "
            f"over {self.pipeline_seconds:.1f} s"
        )
        if self.last_run_seconds:
            lines.append(
                f"  throughput (last run, Spark):  "
                f"{self.last_run_rows / self.last_run_seconds:,.0f} orders/s "
                f"({self.last_run_rows} input rows in {self.last_run_seconds:.1f} s of batches)"
            )
        lines.append(
            "  time per phase:                "
            + ", ".join(f"{k} {v:.1f} s" for k, v in self.phases.items())
        )
        verdict = "PASSED" if self.ok else "FAILED: " + "; ".join(self.problems)
        lines.append(f"  exactly-once check {verdict}")
        return "\n".join(lines)


class Demo:
    """The demo's steps; `close()` stops whatever is still running."""

    def __init__(self, args: DemoOptions, workdir: Path):
        self.args = args
        self.workdir = workdir
        self.broker: EmbeddedBroker | None = None
        self.driver: DriverProcess | None = None
        self.report = Report()
        suffix = "" if not args.bootstrap else f"-{int(time.time())}"
        self.input, self.output = f"orders{suffix}", f"orders-validated{suffix}"
        self.committed_ids: list[int] = []
        self.timeline = tl.Timeline()  # what the report and the console's /demo page show
        self.console_address: tuple[str, int] | None = None
        self.metrics_url: str | None = None  # the embedded broker's, with --console
        self.console: DemoConsole | None = None

    def say(self, text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

    def run(self) -> Report:
        phases = self.report.phases
        start = time.monotonic()
        self.timeline.add(tl.PHASE, "setup")
        self.bootstrap = self._start_broker()
        self._create_topics()
        self._start_console()
        phases["setup"] = time.monotonic() - start
        start = time.monotonic()
        self.timeline.add(tl.PHASE, "feed")
        self._feed()
        phases["feed"] = time.monotonic() - start
        start = time.monotonic()
        self.timeline.add(tl.PHASE, "pipeline")
        self._run_pipeline()
        phases["pipeline"] = self.report.pipeline_seconds = time.monotonic() - start
        start = time.monotonic()
        self.timeline.add(tl.PHASE, "check")
        self._check()
        phases["check"] = time.monotonic() - start
        self.timeline.summary = {**asdict(self.report), "ok": self.report.ok}
        self.timeline.add(tl.PHASE, "done: " + ("PASSED" if self.report.ok else "FAILED"))
        return self.report

    def write_report(self) -> None:
        """Write the HTML report if `--report` asked for one (the run so far on failure)."""
        if self.args.report is None:
            return
        from onceflow.cli.demo_report import write_report

        self.timeline.set_batches(tl.read_batches(self.workdir / "checkpoint"))
        self.timeline.finished = time.time()
        write_report(self.args.report, self.timeline)
        self.say(f"report written to {self.args.report}")

    def _start_console(self) -> None:
        if self.console_address is None:
            return
        from onceflow.cli.demo_console import DemoConsole

        self.console = DemoConsole(self.bootstrap, self.timeline, self.metrics_url)
        self.console.start(*self.console_address)
        host, port = self.console_address
        self.say(f"console on http://{host}:{port}/ (the demo's progress at /demo)")

    def close(self) -> None:
        if self.driver is not None and self.driver.proc.poll() is None:
            self.driver.kill()
        if self.console is not None:
            self.console.stop()
        if self.broker is not None:
            self.broker.stop()

    # ------------------------------------------------------------------ steps

    def _start_broker(self) -> str:
        if self.args.bootstrap:
            self.report.bootstrap = self.args.bootstrap
            return self.args.bootstrap
        self.say("starting an embedded onceflow broker")
        settings = {}
        if self.console_address is not None:  # the console's "Broker metrics" panel reads it
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                metrics_at = f"127.0.0.1:{probe.getsockname()[1]}"
            settings["onceflow.metrics.listener"] = metrics_at
            self.metrics_url = f"http://{metrics_at}/metrics"
        self.broker = EmbeddedBroker(self.workdir / "broker", self.args.timeout, settings=settings)
        self.report.bootstrap = f"an embedded broker on {self.broker.address}"
        return self.broker.address

    def _create_topics(self) -> None:
        try:
            with AdminClient({"bootstrap.servers": self.bootstrap}) as admin:
                # replication factor -1: the cluster's default.replication.factor (KIP-464)
                topics = [NewTopic(t, self.args.partitions, -1) for t in (self.input, self.output)]
                for name, result in admin.create_topics(topics).items():
                    if not result.ok:
                        raise DemoError(f"cannot create topic {name!r}: {result.error_code.name}")
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            raise DemoError(f"cannot reach {self.bootstrap}: {exc}") from exc
        self.say(
            f"created topics {self.input} and {self.output} ({self.args.partitions} partitions)"
        )

    def _feed(self) -> None:
        from onceflow.spark.orders import feed_orders

        n = self.args.records
        self.say(f"feeding {n} orders in transactions of 100, aborting every 5th transaction")
        marks = {n * k // 4 for k in range(1, 4)}

        def progress(done: int) -> None:
            if any(done >= m > done - 100 for m in marks):
                self.say(f"  fed {done}/{n} orders")

        fed = feed_orders(self.bootstrap, self.input, n, progress=progress)
        self.committed_ids = fed.committed_ids
        self.report.records = len(fed.committed_ids)
        self.report.aborted_inputs = len(fed.aborted_ids)
        self.report.aborted_transactions = fed.aborted_transactions

    def _driver_args(self, faults: str) -> list[str]:
        per_trigger = math.ceil(self.args.records * 1.25 / 8)  # about 8 micro-batches
        return [
            "--bootstrap", self.bootstrap, "--input", self.input, "--output", self.output,
            "--checkpoint", str(self.workdir / "checkpoint"), "--master", self.args.master,
            "--max-offsets-per-trigger", str(per_trigger),
            "--faults", faults, "--faults-dir", str(self.workdir / "faults"),
        ]  # fmt: skip

    def committed_batches(self) -> int:
        commits = self.workdir / "checkpoint" / "commits"
        return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0

    def _run_pipeline(self) -> None:
        from onceflow.spark.supervisor import DriverProcess

        mode = self.args.faults
        driver_faults = list(DRIVER_FAULTS) if mode in ("driver", "all") else []
        broker_fault = mode in ("broker", "all")
        log = self.workdir / "driver.log"
        self.say(f"running the Spark pipeline (driver output in {log})")
        for run_number in range(1, len(DRIVER_FAULTS) + MAX_RESTARTS + 1):
            faults = driver_faults.pop(0) if driver_faults else ""
            kill_broker_after = None
            if broker_fault and not faults:
                kill_broker_after = self.committed_batches() + 1
            note = f"; will SIGKILL it at {faults}" if faults else ""
            note += "; will kill -9 the broker mid-run" if kill_broker_after else ""
            self.say(f"driver run {run_number}: starting{note}")
            self.timeline.add(tl.DRIVER_START, f"driver run {run_number}{note}")
            self.driver = DriverProcess(self._driver_args(faults), log, self.workdir / "faults")
            watch = _RunWatch(self, kill_broker_after)
            outcome = self.driver.wait(self.args.timeout, on_tick=watch)
            self.driver = None
            if watch.broker_killed:
                broker_fault = False
            if outcome.fault:
                text = f"SIGKILLed at {outcome.fault} after {outcome.seconds:.1f} s"
            elif outcome.exit_code == 0:
                text = f"finished all input after {outcome.seconds:.1f} s"
            else:
                text = f"failed (exit {outcome.exit_code}) after {outcome.seconds:.1f} s"
            if watch.broker_killed:
                text += " (the broker was kill -9'd and restarted during this run)"
            self.report.driver_runs.append(text)
            self.say(f"driver run {run_number}: {text}")
            kind = tl.DRIVER_KILL if outcome.fault else tl.DRIVER_END
            self.timeline.add(kind, f"driver run {run_number} {text}")
            self.timeline.set_batches(tl.read_batches(self.workdir / "checkpoint"))
            if outcome.exit_code == 0:
                self._read_summary(log)
            if outcome.exit_code == 0 and not driver_faults:
                if broker_fault:
                    self.report.driver_runs.append("(the broker kill was skipped: too few batches)")
                self.report.batches = self.committed_batches()
                return
        raise DemoError(f"the pipeline did not finish after {run_number} driver runs; see {log}")

    def _read_summary(self, log: Path) -> None:
        """Spark's own batch durations of the last run (without JVM start-up and restarts)."""
        from onceflow.spark.pipeline import SUMMARY_PREFIX

        for line in reversed(log.read_text(errors="replace").splitlines()):
            if line.startswith(SUMMARY_PREFIX):
                fields = dict(f.split("=") for f in line[len(SUMMARY_PREFIX) :].split())
                self.report.last_run_rows = int(fields["rows"])
                self.report.last_run_seconds = int(fields["ms"]) / 1000
                return

    def kill_broker(self) -> None:
        if self.broker is None:
            raise DemoError("no embedded broker to kill")
        self.say("  kill -9 of the broker")
        self.timeline.add(tl.BROKER_KILL, f"kill -9 of the broker ({self.broker.address})")
        self.broker.kill9()
        self.broker.restart()
        self.timeline.add(tl.BROKER_RESTART, "broker restarted on the same port and data directory")
        self.say("  broker restarted on the same port and data directory")

    def _check(self) -> None:
        from onceflow.spark.orders import check_output, end_offsets, read_committed

        self.say("checking the output with a read_committed consumer")
        parts = self.args.partitions
        records = read_committed(self.bootstrap, self.output, parts, self.args.timeout)
        check = check_output(records, self.committed_ids)
        report = self.report
        report.outputs = check.outputs
        report.duplicates, report.missing = len(check.duplicates), len(check.missing)
        report.aborted_seen = len(check.aborted_seen)
        report.problems = check.problems()
        lso = end_offsets(self.bootstrap, self.output, parts, read_committed=True)
        hw = end_offsets(self.bootstrap, self.output, parts, read_committed=False)
        report.open_transactions = lso != hw
        if report.open_transactions:
            report.problems.append(f"open transactions on the output: LSO {lso}, HW {hw}")


class _RunWatch:
    """Called while a driver runs: reports committed batches, kills the broker once the
    batch count reaches `kill_broker_after`."""

    def __init__(self, demo: Demo, kill_broker_after: int | None):
        self.demo = demo
        self.kill_broker_after = kill_broker_after
        self.batches = demo.committed_batches()
        self.broker_killed = False

    def __call__(self) -> None:
        batches = self.demo.committed_batches()
        if batches != self.batches:
            self.batches = batches
            self.demo.say(f"  micro-batches committed: {batches}")
            self.demo.timeline.set_batches(tl.read_batches(self.demo.workdir / "checkpoint"))
        if self.kill_broker_after is not None and not self.broker_killed:
            if batches >= self.kill_broker_after:
                self.broker_killed = True
                self.demo.kill_broker()
