"""DescribeLogDirs handler (what `kafka-log-dirs.sh --describe` and the console's partition
sizes ask).

API: DescribeLogDirs (key 35), versions 1-5.

Behaviour: needs DESCRIBE on the CLUSTER, else the top-level error is
CLUSTER_AUTHORIZATION_FAILED (v3+; before v3 only the empty result says so) and no log
directory is listed, as Kafka. Otherwise one result per log directory of the broker (`log.dirs`,
absolute path), each with its total and usable bytes (v4+, from the file system) and the
requested partitions it holds: their size in bytes (every segment's `.log` file, as Kafka's
`UnifiedLog.size`), offset lag 0 and `is_future_key` false (onceflow never moves a replica
between directories). A null topic list asks for every partition; a requested partition the
broker does not have is left out of the answer, not an error (Kafka's rule). A directory is
listed even when it holds none of the requested partitions.

Versions: 1-5; v3 adds the top-level error code, v4 total and usable bytes, v5 `is_cordoned`
(always false: onceflow cordons no directory).

Deviations: none known (a directory that cannot be read is reported with KAFKA_STORAGE_ERROR
and -1 bytes; onceflow's broker does not run with an offline directory, so this only happens
when the directory vanishes under it).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_log_dirs import DescribeLogDirsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.log.manager import LogManager
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.describe_log_dirs import DescribeLogDirsRequest

_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Partition = _Topic.DescribeLogDirsPartition


def _requested(logs: LogManager, request: DescribeLogDirsRequest) -> list[tuple[str, int]]:
    """The (topic, partition) pairs asked about that this broker holds, sorted."""
    if request.topics is None:
        wanted = {(log.topic, log.partition) for log in logs.all_logs()}
    else:
        wanted = {(t.topic, p) for t in request.topics for p in t.partitions}
    return sorted(key for key in wanted if logs.get_log(*key) is not None)


def _directory(log_dir: str, held: list[tuple[str, int, int]]) -> _Result:
    """One directory's result; `held` its (topic, partition, size) of the requested ones."""
    by_topic: dict[str, list[_Partition]] = {}
    for topic, partition, size in held:
        by_topic.setdefault(topic, []).append(
            _Partition(partition_index=partition, partition_size=size, offset_lag=0,
                       is_future_key=False)
        )  # fmt: skip
    try:
        usage = shutil.disk_usage(log_dir)
    except OSError:
        return _Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=os.path.abspath(log_dir),
                       topics=[], total_bytes=-1, usable_bytes=-1)  # fmt: skip
    return _Result(
        error_code=ErrorCode.NONE,
        log_dir=os.path.abspath(log_dir),
        topics=[_Topic(name=name, partitions=parts) for name, parts in by_topic.items()],
        total_bytes=usage.total,
        usable_bytes=usage.free,
        is_cordoned=False,
    )


async def handle_describe_log_dirs(
    ctx: RequestContext, header: RequestHeader, request: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    """Every log directory with the sizes of the requested partitions it holds."""
    refused = denied(ctx, ApiKey.DESCRIBE_LOG_DIRS, "cluster")
    if refused is not None:
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=refused, results=[])
    logs = ctx.broker.logs
    held: dict[str, list[tuple[str, int, int]]] = {d: [] for d in logs.log_dirs}
    for topic, partition in _requested(logs, request):
        log_dir = logs.log_dir_of(topic, partition)
        partition_log = logs.get_log(topic, partition)
        if log_dir in held and partition_log is not None:
            held[log_dir].append((topic, partition, partition_log.size_bytes))
    return DescribeLogDirsResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        results=[_directory(d, parts) for d, parts in held.items()],
    )
