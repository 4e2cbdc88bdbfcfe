"""The topic page's partition sizes (`console.topics.partition_sizes`) from DescribeLogDirs
answers, without a cluster: each partition's size is its leader's, a future replica (a move
between directories in progress) does not count, and a cluster that refuses the request (no
DESCRIBE on the cluster) leaves the sizes blank instead of failing the page."""

from __future__ import annotations

from collections.abc import Iterable

from onceflow.client.error_classes import ClusterAuthorizationFailedError
from onceflow.client.log_dirs_admin import LogDirDescription, ReplicaInfo
from onceflow.common import TopicPartition
from onceflow.console.topics import partition_sizes
from onceflow.protocol.errors import ErrorCode

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


class LogDirsAnswers:
    """Stands in for `AdminClient` where only `describe_log_dirs` is asked."""

    def __init__(self, answers: dict[int, list[LogDirDescription]] | None) -> None:
        self.answers = answers
        self.asked: tuple[set[int], list[TopicPartition]] | None = None

    def describe_log_dirs(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> dict[int, list[LogDirDescription]]:
        self.asked = (set(broker_ids), list(partitions))
        if self.answers is None:
            raise ClusterAuthorizationFailedError("Cluster authorization failed.")
        return self.answers


def _dir(path: str, **replicas: ReplicaInfo) -> LogDirDescription:
    found = {TopicPartition("t", int(k[1:])): v for k, v in replicas.items()}
    return LogDirDescription(path, ErrorCode.NONE, found)


def test_each_partition_has_its_leaders_size() -> None:
    admin = LogDirsAnswers({
        1: [_dir("/a", p0=ReplicaInfo(100, 0, False), p1=ReplicaInfo(7, 0, False))],
        2: [_dir("/b", p1=ReplicaInfo(40, 0, False)),
            _dir("/c", p1=ReplicaInfo(999, 5, True))],  # a future replica: not the log
    })  # fmt: skip
    sizes = partition_sizes(admin, {P0: 1, P1: 2})  # type: ignore[arg-type]
    assert sizes == {P0: 100, P1: 40}
    assert admin.asked == ({1, 2}, [P0, P1])  # the leaders only, about these partitions


def test_a_refused_request_leaves_the_sizes_blank() -> None:
    assert partition_sizes(LogDirsAnswers(None), {P0: 1}) == {}  # type: ignore[arg-type]
