"""Exactly-once consume-transform-produce under kill -9 (the application and the broker).

`tests/support/eos_app.py` (seed 004's ExactlyOnceMessageProcessor pattern with
confluent-kafka) reads 100 000 input records written beforehand over 4 partitions, and for each
poll batch writes the transformed records and the consumer's positions in one transaction. The
test kills the application with SIGKILL several times a few seconds apart and starts it again
(same transactional.id) -- the first time while it holds a transaction whose records are
flushed to the log (`--hold-file`), the others wherever they land -- and once kills the
broker with SIGKILL and restarts it on the same data directory while the application runs.
At the end:

- the output topic read with read_committed holds the transformation of every input record
  exactly once (no loss, no duplicate, byte-exact);
- the group's committed offsets equal the input topic's end offsets;
- the output log really holds aborted work (read_uncommitted sees more records than
  read_committed), so the kills did land inside transactions.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from interop.test_group_confluent import offset_fetch
from interop.workload import create_topic
from support.eos_app import exactly_once_problems
from support.peers import GROUP_BROKER_CONFIG
from support.topic_reader import confluent_read_to_end

APP = Path(__file__).resolve().parent.parent / "support" / "eos_app.py"
N = 100_000
PARTITIONS = 4
GROUP = "eos-group"
APP_KILLS = 4
BROKER_KILL_AT = 2  # after this many application kills
COMPLETE_TIMEOUT_S = 120.0


def input_value(seq: int) -> bytes:
    return b"record-%06d" % seq


class AppProcess:
    """The EOS application as a child process; its stderr is appended to `log_path`."""

    def __init__(self, bootstrap: str, log_path: Path) -> None:
        self.bootstrap = bootstrap
        self.log_path = log_path
        self.hold_file = log_path.with_name("hold")  # while it exists the app stops mid-txn
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.self_exits: list[int] = []

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(APP),
                    "--bootstrap",
                    self.bootstrap,
                    "--input",
                    "eos-in",
                    "--output",
                    "eos-out",
                    "--group",
                    GROUP,
                    "--transactional-id",
                    "eos-app-1",
                    "--hold-file",
                    str(self.hold_file),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        self.starts += 1

    def ensure_running(self) -> None:
        """Start the application again if it exited on its own (noted in `self_exits`)."""
        if self.proc is not None and self.proc.poll() is not None:
            self.self_exits.append(self.proc.returncode)
            self.start()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def kill_mid_transaction(self, timeout: float = 30.0) -> None:
        """SIGKILL the app while it holds a transaction whose records are flushed to the log,
        so the kill is known to leave aborted work behind."""
        held = Path(f"{self.hold_file}.held")
        self.hold_file.touch()
        deadline = time.monotonic() + timeout
        while not held.exists() and self.proc is not None and self.proc.poll() is None:
            assert time.monotonic() < deadline, f"the app never held\n{self.log_tail()}"
            time.sleep(0.02)
        self.kill()
        self.hold_file.unlink()
        held.unlink(missing_ok=True)

    def terminate(self, timeout: float = 30.0) -> int | None:
        """SIGTERM once the app has installed its handler (a just-restarted app would otherwise
        die of the signal), then wait for its exit code."""
        if self.proc is None:
            return None
        ready = f"started pid={self.proc.pid},"
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and ready not in self.log_tail(1_000_000):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


def write_input(bootstrap: str) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True}
    )
    for seq in range(N):
        producer.produce("eos-in", value=input_value(seq), partition=seq % PARTITIONS)
        if seq % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def committed_offsets(bootstrap: str, *, require_stable: bool = True) -> dict[int, int]:
    """The group's committed offsets (-1 when none), retrying while they are unstable (with
    `require_stable`) or the broker cannot answer yet."""
    deadline = time.monotonic() + 30
    answer: object = None
    while True:
        try:
            answer = offset_fetch(bootstrap, GROUP, "eos-in", require_stable=require_stable)
            if all(error == 0 for _, error in answer.values()):
                return {p: offset for p, (offset, _) in answer.items()}
        except (OSError, AssertionError) as exc:
            answer = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"committed offsets not readable: {answer!r}")
        time.sleep(0.2)


def read_output(bootstrap: str, isolation: str) -> list[tuple[int, int, bytes]]:
    """Every record of eos-out visible at `isolation`: (partition, offset, value)."""
    return confluent_read_to_end({"bootstrap.servers": bootstrap}, "eos-out", PARTITIONS, isolation)


@pytest.mark.timeout(300)
def test_eos_app_exactly_once_through_app_and_broker_kills(broker_factory, tmp_path):
    broker = broker_factory(GROUP_BROKER_CONFIG)
    create_topic(broker.bootstrap, "eos-in", PARTITIONS)
    create_topic(broker.bootstrap, "eos-out", PARTITIONS)
    write_input(broker.bootstrap)
    end_offsets = dict.fromkeys(range(PARTITIONS), N // PARTITIONS)

    app = AppProcess(broker.bootstrap, tmp_path / "eos_app.log")
    rng = random.Random(4004)
    progress_at_kills: list[int] = []

    def progress() -> int:
        offsets = committed_offsets(broker.bootstrap, require_stable=False)
        return sum(max(o, 0) for o in offsets.values())

    try:
        app.start()
        for kill in range(1, APP_KILLS + 1):
            # kill at a point of progress, not of time, so the kills land mid-run however fast
            # the machine is: after 10-15%, 30-35%, ... of the input was committed
            target = int(N * (0.2 * kill - 0.1 + rng.uniform(0.0, 0.05)))
            deadline = time.monotonic() + COMPLETE_TIMEOUT_S
            while progress() < target:
                assert time.monotonic() < deadline, f"no progress to {target}\n{app.log_tail()}"
                app.ensure_running()
                time.sleep(0.05)
            if kill == 1:  # one kill is sure to land inside a flushed transaction
                app.kill_mid_transaction()
            else:
                app.kill()
            progress_at_kills.append(progress())
            if kill == BROKER_KILL_AT:
                app.start()
                time.sleep(rng.uniform(1.0, 2.5))
                broker.restart(kill=True)
                assert broker.bootstrap == app.bootstrap, "broker came back on another port"
            else:
                app.start()
        deadline = time.monotonic() + COMPLETE_TIMEOUT_S
        while committed_offsets(broker.bootstrap) != end_offsets:
            assert time.monotonic() < deadline, (
                f"not done: {committed_offsets(broker.bootstrap)}\n{app.log_tail()}"
            )
            app.ensure_running()
            time.sleep(0.5)
        assert app.terminate() == 0, app.log_tail()
    finally:
        app.kill()

    # the kills happened while work remained
    assert all(done < N for done in progress_at_kills), progress_at_kills
    assert committed_offsets(broker.bootstrap) == end_offsets

    committed = read_output(broker.bootstrap, "read_committed")
    inputs = {(seq % PARTITIONS, seq // PARTITIONS): input_value(seq) for seq in range(N)}
    assert exactly_once_problems([(p, value) for p, _o, value in committed], inputs) == []
    assert len(committed) == N

    uncommitted = read_output(broker.bootstrap, "read_uncommitted")
    print(
        f"app starts {app.starts}, self exits {app.self_exits}, committed progress at kills "
        f"{progress_at_kills}, output records read_uncommitted {len(uncommitted)} vs "
        f"read_committed {len(committed)}"
    )
    assert len(uncommitted) > N, "no aborted transaction reached the output log"
