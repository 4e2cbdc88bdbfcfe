"""Consumer groups with kafka-python 3 and aiokafka, and with `kcat -G`, against a live broker.

Each client joins a group with subscribe(), reads every record of a 4-partition topic, commits,
and the commit must be what OffsetFetch returns (end offset of every partition). A second
consumer of the same group then starts from the committed offsets: it reads only records
produced after the commit. kcat's balanced consumer (`-G`) reads everything and commits
(auto-commit) on exit.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest

from interop.test_group_confluent import PARTITIONS, WAIT_S, offset_fetch, produce_values
from interop.workload import create_topic
from onceflow.protocol.errors import ErrorCode

KCAT = shutil.which("kcat")


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    answer = offset_fetch(bootstrap, group, topic, require_stable=False)
    assert {error for _, error in answer.values()} == {ErrorCode.NONE}
    return {partition: offset for partition, (offset, _) in answer.items()}


def _kafka_python_consume(bootstrap: str, topic: str, group: str, n: int) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(values) < n:
            assert time.monotonic() < deadline, f"read {len(values)} of {n}"
            for records in consumer.poll(timeout_ms=200).values():
                values.extend(r.value for r in records)
        assert not any(consumer.poll(timeout_ms=500).values())
        consumer.commit()
    finally:
        consumer.close()
    return values


def test_kafka_python_group_consumer_commits_and_resumes(group_broker):
    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "kp", PARTITIONS)
    produce_values(bootstrap, "kp", [b"a%02d" % i for i in range(40)])
    assert sorted(_kafka_python_consume(bootstrap, "kp", "kp-group", 40)) == [
        b"a%02d" % i for i in range(40)
    ]
    assert committed(bootstrap, "kp-group", "kp") == dict.fromkeys(range(PARTITIONS), 10)
    produce_values(bootstrap, "kp", [b"b%02d" % i for i in range(8)])
    assert sorted(_kafka_python_consume(bootstrap, "kp", "kp-group", 8)) == [
        b"b%02d" % i for i in range(8)
    ]
    assert committed(bootstrap, "kp-group", "kp") == dict.fromkeys(range(PARTITIONS), 12)


async def _aiokafka_consume(bootstrap: str, topic: str, group: str, n: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while len(values) < n:
            assert time.monotonic() < deadline, f"read {len(values)} of {n}"
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                values.extend(r.value for r in records)
        assert not any((await consumer.getmany(timeout_ms=500)).values())
        await consumer.commit()
    finally:
        await consumer.stop()
    return values


def test_aiokafka_group_consumer_commits_and_resumes(group_broker):
    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "aio", PARTITIONS)
    produce_values(bootstrap, "aio", [b"a%02d" % i for i in range(40)])
    first = asyncio.run(_aiokafka_consume(bootstrap, "aio", "aio-group", 40))
    assert sorted(first) == [b"a%02d" % i for i in range(40)]
    assert committed(bootstrap, "aio-group", "aio") == dict.fromkeys(range(PARTITIONS), 10)
    produce_values(bootstrap, "aio", [b"b%02d" % i for i in range(8)])
    second = asyncio.run(_aiokafka_consume(bootstrap, "aio", "aio-group", 8))
    assert sorted(second) == [b"b%02d" % i for i in range(8)]
    assert committed(bootstrap, "aio-group", "aio") == dict.fromkeys(range(PARTITIONS), 12)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_balanced_consumer(group_broker):
    bootstrap = group_broker.bootstrap
    create_topic(bootstrap, "kc", PARTITIONS)
    produce_values(bootstrap, "kc", [b"line-%02d" % i for i in range(40)])
    cmd = [
        KCAT,
        "-b",
        bootstrap,
        "-X",
        "auto.offset.reset=earliest",
        "-X",
        "session.timeout.ms=6000",
        "-e",  # exit once every assigned partition reached its end
        "-G",
        "kc-group",
        "kc",
    ]
    result = subprocess.run(cmd, capture_output=True, timeout=WAIT_S * 2)
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().split()
    assert sorted(lines) == [f"line-{i:02d}" for i in range(40)]
    # kcat commits (auto-commit) what it read; the commit must be there once it exits
    deadline = time.monotonic() + WAIT_S
    while committed(bootstrap, "kc-group", "kc") != dict.fromkeys(range(PARTITIONS), 10):
        assert time.monotonic() < deadline, committed(bootstrap, "kc-group", "kc")
        time.sleep(0.1)
