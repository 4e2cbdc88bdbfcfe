"""DescribeLogDirs (API 35) in-process: every log directory, the requested partitions it holds
with their size in bytes, unknown ones left out, every version, and DESCRIBE on the cluster
required as in Kafka."""

from __future__ import annotations

import asyncio
import os

import pytest

from broker.authz_helpers import ALICE, creation, grant, open_authz_state
from broker.broker_helpers import call, produce_partitions
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from onceflow.records.builder import BatchBuilder
from onceflow.security.acl import CLUSTER_NAME, AclOperation, ResourceType

_Topic = DescribeLogDirsRequest.DescribableLogDirTopic


def describe(state, topics, version=4, principal=None):
    """(top-level error, {log_dir: (error, {(topic, partition): size}, total, usable)})."""
    request = DescribeLogDirsRequest(
        topics=None if topics is None else [_Topic(topic=t, partitions=ps) for t, ps in topics]
    )
    extra = {} if principal is None else {"principal": principal}
    response = asyncio.run(call(state, ApiKey.DESCRIBE_LOG_DIRS, version, request, **extra))
    dirs = {
        r.log_dir: (
            ErrorCode(r.error_code),
            {(t.name, p.partition_index): p.partition_size for t in r.topics for p in t.partitions},
            r.total_bytes,
            r.usable_bytes,
        )
        for r in response.results
    }
    return ErrorCode(response.error_code), dirs


def _write(state, topic: str, partition: int, count: int) -> None:
    batch = BatchBuilder()
    for i in range(count):
        batch.append(None, None, b"v%d" % i)
    (result,) = produce_partitions(state, topic, {partition: bytes(batch.build())}).values()
    assert result.error_code == ErrorCode.NONE


@pytest.fixture
def written(state):
    state.logs.create_topic("a", 2)
    state.logs.create_topic("b", 1)
    _write(state, "a", 0, 3)
    return state


def _size(state, topic: str, partition: int) -> int:
    """The bytes of the partition's `.log` files on disk."""
    directory = os.path.join(state.logs.log_dir_of(topic, partition), f"{topic}-{partition}")
    return sum(
        os.path.getsize(os.path.join(directory, name))
        for name in os.listdir(directory)
        if name.endswith(".log")
    )


def test_sizes_of_the_requested_partitions_unknown_ones_left_out(written):
    (log_dir,) = written.logs.log_dirs
    error, dirs = describe(written, [("a", [0, 1, 7]), ("nope", [0])])
    assert error == ErrorCode.NONE and list(dirs) == [os.path.abspath(log_dir)]
    dir_error, sizes, total, usable = dirs[os.path.abspath(log_dir)]
    assert dir_error == ErrorCode.NONE
    assert sizes == {("a", 0): _size(written, "a", 0), ("a", 1): 0}
    assert sizes[("a", 0)] > 0 and total >= usable > 0


def test_null_topics_describe_every_partition(written):
    _error, dirs = describe(written, None)
    ((_dir_error, sizes, _total, _usable),) = dirs.values()
    assert set(sizes) == {("a", 0), ("a", 1), ("b", 0)}


def test_a_directory_is_listed_even_without_requested_partitions(written):
    _error, dirs = describe(written, [("nope", [0])])
    assert [sizes for _e, sizes, _t, _u in dirs.values()] == [{}]


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_every_version(written, version):
    error, dirs = describe(written, [("a", [0])], version=version)
    ((dir_error, sizes, total, _usable),) = dirs.values()
    assert (error, dir_error, list(sizes)) == (ErrorCode.NONE, ErrorCode.NONE, [("a", 0)])
    assert (total > 0) == (version >= 4)  # total and usable bytes came with v4


def test_needs_describe_on_the_cluster(tmp_path):
    state = open_authz_state(tmp_path / "data")
    try:
        state.logs.create_topic("a", 1)
        error, dirs = describe(state, None, version=3, principal=ALICE)
        assert (error, dirs) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {})
        assert describe(state, None, version=1, principal=ALICE) == (ErrorCode.NONE, {})
        grant(state, creation(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE))
        error, dirs = describe(state, None, version=3, principal=ALICE)
        assert error == ErrorCode.NONE and [list(d[1]) for d in dirs.values()] == [[("a", 0)]]
    finally:
        asyncio.run(state.close())
