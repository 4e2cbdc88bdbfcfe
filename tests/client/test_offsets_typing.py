"""The offsets `Consumer.commit` and `Producer.send_offsets_to_transaction` take are typed
(`onceflow.client.offsets.Offsets`): mypy accepts every documented form, a mapping keyed by
onceflow's or by any `topic`/`partition` object, `(topic, partition, offset)` tuples and
confluent-kafka-like items, and refuses what would fail at run time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

USE = """\
from dataclasses import dataclass

from onceflow.client.consumer import Consumer
from onceflow.client.offsets import OffsetAndMetadata
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition


@dataclass
class Item:  # confluent-kafka's TopicPartition has these attributes
    topic: str
    partition: int
    offset: int


def use(consumer: Consumer, producer: Producer) -> None:
    consumer.commit({TopicPartition("t", 0): 5})
    consumer.commit({("t", 0): OffsetAndMetadata(5, "meta")})
    consumer.commit([("t", 0, 5)])
    consumer.commit([Item("t", 0, 5)])
    producer.send_offsets_to_transaction({TopicPartition("t", 0): 5}, "group")
    producer.send_offsets_to_transaction([Item("t", 1, 7)], consumer.consumer_group_metadata())
    consumer.commit({"t": 5})
    producer.send_offsets_to_transaction([5], "group")
"""


def test_offsets_are_typed(tmp_path: Path) -> None:
    (tmp_path / "use.py").write_text(USE)
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nstrict = True\nignore_missing_imports = True\nfollow_imports = silent\n"
        f"mypy_path = {ROOT / 'src'}\ncache_dir = {tmp_path / 'cache'}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "use.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line.split(": error:")[0] for line in done.stdout.splitlines() if ": error:" in line]
    # only the last two calls: a mapping keyed by a bare topic name, a list of bare offsets
    assert errors == ["use.py:23", "use.py:24"], done.stdout + done.stderr
