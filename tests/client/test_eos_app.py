"""Exactly-once consume-transform-produce with the onceflow client under kill -9.

The onceflow twin of tests/faults/test_fault_eos_app.py: `support/eos_app.py --client
onceflow` (our consumer group + transactional producer + send_offsets_to_transaction)
processes 20 000 input records over 4 partitions. Once a good part is done, the test
makes the application stop inside a transaction whose records are already in the output log
(`--hold-file`), kills it with SIGKILL there, and starts it again with the same
transactional.id (which fences and aborts the dead instance's transaction). At the end:

- the output read with read_committed (by our consumer and by confluent-kafka) holds the
  transformation of every input record exactly once, byte-exact;
- the group's committed offsets equal the input's end offsets;
- read_uncommitted sees more records than that: the kill really left aborted work behind.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.eos_app import exactly_once_problems

from client.client_support import (
    FAST_GROUP_BROKER,
    confluent_read_all,
    group_consumer,
    produce,
    read_all,
)
from client.helpers import create_topic
from onceflow.client import TopicPartition

APP = Path(__file__).resolve().parent.parent / "support" / "eos_app.py"
N = 20_000
PARTITIONS = 4
GROUP = "client-eos-group"
WAIT_S = 90.0


def input_value(seq: int) -> bytes:
    return b"record-%06d" % seq


def start_app(bootstrap: str, log_path: Path, hold_file: Path) -> subprocess.Popen:
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                str(APP),
                "--bootstrap",
                bootstrap,
                "--input",
                "eos-in",
                "--output",
                "eos-out",
                "--group",
                GROUP,
                "--transactional-id",
                "client-eos-1",
                "--hold-file",
                str(hold_file),
                "--client",
                "onceflow",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def committed_offsets(bootstrap: str) -> dict[int, int]:
    """The group's committed offsets (stable: waits out pending transactions), -1 if none."""
    consumer = group_consumer(bootstrap, GROUP, **{"isolation.level": "read_committed"})
    try:
        answer = consumer.committed(
            [TopicPartition("eos-in", p) for p in range(PARTITIONS)], timeout=30
        )
    finally:
        consumer.close()
    return {tp.partition: (c.offset if c is not None else -1) for tp, c in answer.items()}


def wait_for(condition, what: str, log_path: Path, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)


@pytest.mark.timeout(240)
def test_client_eos_app_exactly_once_through_kill(broker_factory, tmp_path):
    broker = broker_factory(FAST_GROUP_BROKER)
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "eos-in", PARTITIONS)
    create_topic(bootstrap, "eos-out", PARTITIONS)
    # the input comes in two halves: the hold is asked for before the second half exists, so
    # the app cannot have finished everything before it sees the hold file
    half = N // 2
    produce(bootstrap, "eos-in", [input_value(seq) for seq in range(half)], PARTITIONS)
    end_offsets = dict.fromkeys(range(PARTITIONS), N // PARTITIONS)
    log_path = tmp_path / "eos_app.log"
    hold = tmp_path / "hold"
    held = Path(f"{hold}.held")

    app = start_app(bootstrap, log_path, hold)
    try:
        wait_for(
            lambda: sum(max(o, 0) for o in committed_offsets(bootstrap).values()) >= N // 4,
            "a quarter of the input",
            log_path,
        )
        hold.touch()
        values = [input_value(seq) for seq in range(half, N)]
        produce(bootstrap, "eos-in", values, PARTITIONS, first=half)
        wait_for(held.exists, "the application holding inside a transaction", log_path)
        progress_at_kill = sum(max(o, 0) for o in committed_offsets_unstable(bootstrap).values())
        app.send_signal(signal.SIGKILL)
        app.wait()
        hold.unlink()
        app = start_app(bootstrap, log_path, hold)
        wait_for(
            lambda: committed_offsets(bootstrap) == end_offsets, "the end of the input", log_path
        )
        app.terminate()
        assert app.wait(30) == 0, log_path.read_text()[-3000:]
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    assert progress_at_kill < N

    committed = read_all(bootstrap, "eos-out", PARTITIONS, "read_committed", expect=N)
    inputs = {(seq % PARTITIONS, seq // PARTITIONS): input_value(seq) for seq in range(N)}
    assert exactly_once_problems([(r.partition, r.value) for r in committed], inputs) == []
    assert len(committed) == N

    theirs = confluent_read_all(bootstrap, "eos-out", PARTITIONS, "read_committed", N)
    assert sorted(theirs) == sorted(r.value for r in committed)
    uncommitted = read_all(bootstrap, "eos-out", PARTITIONS, "read_uncommitted", expect=N + 1)
    print(
        f"committed progress at kill {progress_at_kill}, output read_uncommitted "
        f"{len(uncommitted)} vs read_committed {len(committed)}"
    )
    assert len(uncommitted) > N, "the kill left no aborted transaction in the output log"


def committed_offsets_unstable(bootstrap: str) -> dict[int, int]:
    """The committed offsets now, without waiting for the open transaction."""
    consumer = group_consumer(bootstrap, GROUP)
    try:
        answer = consumer.committed([TopicPartition("eos-in", p) for p in range(PARTITIONS)])
    finally:
        consumer.close()
    return {tp.partition: (c.offset if c is not None else -1) for tp, c in answer.items()}
