"""kcat against a live onceflow broker: metadata (-L), produce (-P) and consume (-C -e).

kcat's consumer mode here is librdkafka's simple (group-less) consumer, so no group features are
needed. Lines piped into `kcat -P` (with keys, split by -K) must come back from
`kcat -C -o beginning -e` unchanged and in order, partition by partition.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from interop.workload import create_topic

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
TIMEOUT_S = 60


def _kcat(broker, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    cmd = [KCAT, "-b", broker.bootstrap, "-X", "socket.timeout.ms=10000", *args]
    result = subprocess.run(cmd, input=stdin, capture_output=True, timeout=TIMEOUT_S)
    if result.returncode != 0:
        raise AssertionError(f"{cmd} exited {result.returncode}: {result.stderr.decode()}")
    return result


def test_kcat_metadata_lists_broker_and_topic(broker):
    create_topic(broker.bootstrap, "kcat-meta", 3)
    listing = json.loads(_kcat(broker, "-L", "-J").stdout)
    assert [(b["id"], b["name"]) for b in listing["brokers"]] == [
        (listing["controllerid"], f"{broker.host}:{broker.port}")
    ]
    topic = next(t for t in listing["topics"] if t["topic"] == "kcat-meta")
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2]
    assert all(p["leader"] == listing["controllerid"] for p in topic["partitions"])
    plain = _kcat(broker, "-L").stdout.decode()
    assert 'topic "kcat-meta" with 3 partitions' in plain


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_then_consume_from_beginning(broker, codec):
    topic = f"kcat-{codec}"
    create_topic(broker.bootstrap, topic, 2)
    per_partition = {
        p: [f"key{p}-{i}:line {i} of partition {p}" for i in range(500)] for p in (0, 1)
    }
    for partition, lines in per_partition.items():
        _kcat(
            broker,
            "-P",
            "-t",
            topic,
            "-p",
            str(partition),
            "-K",
            ":",
            "-z",
            codec,
            "-X",
            "acks=all",
            stdin=("\n".join(lines) + "\n").encode(),
        )
    for partition, lines in per_partition.items():
        out = _kcat(
            broker,
            "-C",
            "-t",
            topic,
            "-p",
            str(partition),
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o %k:%s\n",
        ).stdout.decode()
        got = out.splitlines()
        assert got == [f"{i} {line}" for i, line in enumerate(lines)]
