"""`onceflow produce` / `onceflow consume` against a live broker, as real processes.

Binary-safe round trips (delimiters, key separators, headers, every format token), one
transaction per input (committed at EOF, aborted on a bad record and on SIGINT),
read_committed by default, start positions (beginning, offset, timestamp), consumer groups
resuming from committed offsets, SIGINT mid-stream, and usage errors.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from client.helpers import create_topic

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition

TIMEOUT = 30


def onceflow(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "onceflow", *argv],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
    )


def spawn(*argv: str, **kwargs) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "onceflow", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def consume(bootstrap: str, topic: str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return onceflow(
        "consume", topic, "--bootstrap-server", bootstrap, "--timeout-ms", "1500", *extra
    )


def ends(bootstrap: str, topic: str, partitions: int = 1) -> tuple[list[int], list[int]]:
    """(high watermarks, last stable offsets) of the topic's partitions."""
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
        hw = admin.list_offsets(specs)
        lso = admin.list_offsets(specs, isolation_level=1)
    return [hw[tp].offset for tp in specs], [lso[tp].offset for tp in specs]


def test_binary_round_trip_with_keys_headers_and_format(broker):
    b = broker.bootstrap
    create_topic(b, "bin", 2)
    values = [b"line\nbreak", b"\x00\xff\x01tab\tin", b"", b"plain"]
    stdin = b"\x1e".join(b"k%d|" % i + v for i, v in enumerate(values)) + b"\x1e"
    done = onceflow(
        "produce", "bin", "--bootstrap-server", b, "--delimiter", "\\x1e",
        "--key-separator", "|", "--partition", "1", "--header", "h1=x", "--header", "h2=",
        stdin=stdin,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"4 records delivered" in done.stderr

    got = consume(b, "bin", "--from-beginning", "-f", "%p|%o|%K|%k|%S|%h|%s\\x1e")
    assert got.returncode == 0, got.stderr
    rows = got.stdout.split(b"\x1e")[:-1]
    expected = [b"1|%d|2|k%d|%d|h1=x,h2=|" % (i, i, len(v)) + v for i, v in enumerate(values)]
    assert rows == expected
    assert b"Processed a total of 4 messages" in got.stderr


def test_transaction_is_committed_at_end_of_input(broker):
    b = broker.bootstrap
    create_topic(b, "txn", 1)
    done = onceflow(
        "produce", "txn", "--bootstrap-server", b, "--transactional-id", "cli-1",
        stdin=b"a\nb\nc\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"3 records committed" in done.stderr
    assert consume(b, "txn", "--from-beginning").stdout == b"a\nb\nc\n"
    hw, lso = ends(b, "txn")
    assert hw == lso == [4]  # three records and the COMMIT marker


def test_bad_record_aborts_the_transaction(broker):
    b = broker.bootstrap
    create_topic(b, "bad", 1)
    stdin = b"".join(b"k%d=v%d\n" % (i, i) for i in range(50)) + b"no separator\n"
    done = onceflow(
        "produce", "bad", "--bootstrap-server", b, "--transactional-id", "cli-2",
        "--key-separator", "=", stdin=stdin,
    )  # fmt: skip
    assert done.returncode == 2
    assert b"record 51 has no key separator" in done.stderr
    assert b"transaction aborted" in done.stderr
    # whatever of the 50 good records reached the log was aborted with the transaction
    assert consume(b, "bad", "--from-beginning").stdout == b""
    hw, lso = ends(b, "bad")
    assert hw == lso


def test_read_committed_is_the_default(broker):
    b = broker.bootstrap
    create_topic(b, "open", 1)
    with Producer({"bootstrap.servers": b}) as plain:
        plain.send("open", b"before", partition=0).get(TIMEOUT)
    producer = Producer({"bootstrap.servers": b, "transactional.id": "open-txn"})
    try:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        producer.send("open", b"pending", partition=0)
        producer.flush(TIMEOUT)
        assert consume(b, "open", "--from-beginning").stdout == b"before\n"
        everything = consume(b, "open", "--from-beginning", "--isolation", "READ_UNCOMMITTED")
        assert everything.stdout == b"before\npending\n"
        producer.commit_transaction(TIMEOUT)
        assert consume(b, "open", "--from-beginning").stdout == b"before\npending\n"
    finally:
        producer.close(5)


def test_start_positions(broker):
    b = broker.bootstrap
    create_topic(b, "pos", 1)
    with Producer({"bootstrap.servers": b}) as producer:
        for i in range(5):
            producer.send("pos", b"v%d" % i, partition=0, timestamp=1_700_000_000_000 + i * 1000)
        producer.flush(TIMEOUT)
    one = ("--partition", "0")
    assert consume(b, "pos", *one, "--offset", "3").stdout == b"v3\nv4\n"
    assert consume(b, "pos", *one, "--offset", "beginning").stdout.count(b"\n") == 5
    assert consume(b, "pos", *one, "--offset", "end").stdout == b""
    assert consume(b, "pos", "--timestamp", "1700000002000").stdout == b"v2\nv3\nv4\n"
    iso = consume(b, "pos", "--timestamp", "2023-11-14T22:13:23Z", "-f", "%T %s\\n")
    assert iso.stdout == b"1700000003000 v3\n1700000004000 v4\n"
    assert consume(b, "pos", "--max-messages", "2", "--from-beginning").stdout == b"v0\nv1\n"


def test_group_resumes_from_its_committed_offsets(broker):
    b = broker.bootstrap
    create_topic(b, "grp", 1)
    onceflow("produce", "grp", "--bootstrap-server", b, stdin=b"1\n2\n3\n4\n5\n")
    first = consume(b, "grp", "--group", "g1", "--from-beginning", "--max-messages", "3")
    assert first.returncode == 0 and first.stdout == b"1\n2\n3\n", first.stderr
    second = consume(b, "grp", "--group", "g1", "--from-beginning")
    assert second.stdout == b"4\n5\n"


def test_sigint_mid_stream_stops_cleanly_and_commits(broker):
    b = broker.bootstrap
    create_topic(b, "live", 1)
    onceflow("produce", "live", "--bootstrap-server", b, stdin=b"x\n" * 20)
    proc = spawn("consume", "live", "--bootstrap-server", b, "--group", "g2", "--from-beginning")
    try:
        assert proc.stdout is not None
        assert proc.stdout.read(40) == b"x\n" * 20  # all of it arrived; now it waits for more
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert b"Processed a total of 20 messages" in err
    assert b"Traceback" not in err
    with AdminClient({"bootstrap.servers": b}) as admin:
        committed = admin.list_consumer_group_offsets("g2", [TopicPartition("live", 0)])
    assert list(committed.values()) == [(20, "")]


def _default_sigint() -> None:
    """A child of a shell's background job inherits SIGINT ignored (POSIX), and Python then
    installs no KeyboardInterrupt handler; give the CLI the Ctrl-C a terminal user has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_aborts_an_open_transaction(broker):
    b = broker.bootstrap
    create_topic(b, "intr", 1)
    proc = spawn(
        "produce", "intr", "--bootstrap-server", b, "--transactional-id", "cli-3",
        stdin=subprocess.PIPE, preexec_fn=_default_sigint,
    )  # fmt: skip
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"r\n" * 10)
        proc.stdin.flush()
        deadline = time.monotonic() + TIMEOUT
        while ends(b, "intr")[0] != [10]:  # the records reached the log, uncommitted
            assert time.monotonic() < deadline, "records never reached the log"
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        # wait with stdin still open: closing it first (communicate does) races the signal
        # with an EOF, which commits
        proc.wait(timeout=20)
        _out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert b"transaction aborted" in err
    hw, lso = ends(b, "intr")
    assert hw == lso == [11]  # ten records and the ABORT marker
    assert consume(b, "intr", "--from-beginning").stdout == b""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--offset", "abc", "--partition", "0"), b"expected beginning, end or a number"),
        (("--offset", "3"), b"--offset needs --partition"),
        (("--timestamp", "yesterday"), b"not milliseconds or ISO-8601"),
        (("-f", "%q"), b"unknown format token %q"),
        (("--group", "g", "--partition", "0"), b"cannot be combined"),
        (("--isolation", "dirty"), b"invalid choice"),
    ],
)
def test_consume_usage_errors(broker, argv, message):
    done = onceflow("consume", "t", "--bootstrap-server", broker.bootstrap, *argv)
    assert done.returncode == 2
    assert done.stderr.startswith(b"usage: onceflow consume")
    assert message in done.stderr


def test_unknown_topic_and_partition(broker):
    b = broker.bootstrap
    create_topic(b, "known", 1)
    done = consume(b, "nope")
    assert done.returncode == 1 and b"topic 'nope' does not exist" in done.stderr
    done = consume(b, "known", "--partition", "7")
    assert done.returncode == 1 and b"has no partition 7" in done.stderr
    assert onceflow("produce", "--bootstrap-server", b).returncode == 2  # no topic


def test_version():
    done = onceflow("--version")
    assert done.returncode == 0 and done.stdout.startswith(b"onceflow ")
