"""CreateTopics and CreatePartitions when the broker runs out of file descriptors.

A broker started with a low open-files limit (RLIMIT_NOFILE) cannot open every partition of a
large new topic. Kafka answers a storage failure with an error code; so must onceflow: the
topic gets KAFKA_STORAGE_ERROR naming the cause, the partitions already made are removed (no
directory left behind, nothing in the registry), and the same connection goes on serving: a
small topic is created, written and read next. After a restart with normal limits the failed
topic does not exist. Growing a topic past the limit is refused the same way and leaves its
partition count as it was.
"""

from __future__ import annotations

import os
import sys

from support.broker import BrokerProcess

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.consumer import Consumer
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode

OPEN_FILES = 160  # the broker starts with ~40 open; a new partition takes one (its .log)
_LIMITED = (
    "import os, resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({OPEN_FILES}, {OPEN_FILES})); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


class FdLimitedBroker(BrokerProcess):
    """A broker whose process may hold only `OPEN_FILES` file descriptors."""

    def command(self, port: int) -> list[str]:
        argv = super().command(port)
        return [sys.executable, "-c", _LIMITED, *argv[1:]]


def _partition_dirs(data_dir, topic: str) -> list[str]:
    return sorted(n for n in os.listdir(data_dir) if n.startswith(f"{topic}-"))


def test_running_out_of_file_descriptors_is_a_storage_error_and_is_undone(tmp_path):
    data = tmp_path / "data"
    broker = FdLimitedBroker(data)
    try:
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            big = admin.create_topics([NewTopic("big", 200, 1)])["big"]
            assert big.error_code == ErrorCode.KAFKA_STORAGE_ERROR, big
            assert "open files" in (big.error_message or ""), big
            assert _partition_dirs(data, "big") == []
            assert admin.describe_topics(["big"])["big"].error_code != ErrorCode.NONE

            small = admin.create_topics([NewTopic("small", 2, 1)])["small"]  # same connection
            assert small.error_code == ErrorCode.NONE, small
            grown = admin.create_partitions({"small": 200})["small"]
            assert grown.error_code == ErrorCode.KAFKA_STORAGE_ERROR, grown
            assert len(admin.describe_topics(["small"])["small"].partitions) == 2
            assert _partition_dirs(data, "small") == ["small-0", "small-1"]
        with Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"}) as producer:
            producer.send("small", b"after", partition=1)
            producer.flush(30)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap})
        try:
            consumer.assign([TopicPartition("small", 1)])
            consumer.seek(TopicPartition("small", 1), 0)
            values: list[bytes | None] = []
            for _ in range(20):
                values += [r.value for r in consumer.poll(0.5)]
                if values:
                    break
            assert values == [b"after"]
        finally:
            consumer.close()
    finally:
        broker.stop()
    assert "creating partition big-" in broker.log_text()  # one line says what failed

    restarted = BrokerProcess(data)
    try:
        with AdminClient({"bootstrap.servers": restarted.bootstrap}) as admin:
            topics = admin.describe_topics(["big", "small"])
            assert topics["big"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert len(topics["small"].partitions) == 2
    finally:
        restarted.stop()
