"""How a batch is cut into read tasks (`plan_ranges`): Spark's `minPartitions` and
`maxRecordsPerPartition` rules, without Spark."""

from __future__ import annotations

import pytest

from onceflow.spark.offsets import plan_ranges
from onceflow.spark.options import OptionError, parse_source_options


def _plan(sizes: dict[int, int], min_partitions=None, max_records=None) -> list[tuple]:
    """Tasks as (partition, from, until) for partitions of topic "t" read from offset 100."""
    start = {("t", p): 100 for p in sizes}
    end = {("t", p): 100 + n for p, n in sizes.items()}
    return [
        (r.partition, r.from_offset, r.until_offset)
        for r in plan_ranges(start, end, min_partitions, max_records)
    ]


def _covers(tasks: list[tuple], sizes: dict[int, int]) -> bool:
    """Each partition's tasks are contiguous, non-empty and cover [100, 100 + size)."""
    for p, n in sizes.items():
        mine = [(a, b) for q, a, b in tasks if q == p]
        if n == 0:
            if mine:
                return False
            continue
        bounds = [100] + [b for _, b in mine]
        if [a for a, _ in mine] != bounds[:-1] or bounds[-1] != 100 + n:
            return False
        if any(b <= a for a, b in mine):
            return False
    return True


def test_one_task_per_partition_with_data_by_default():
    assert _plan({0: 10, 1: 0, 2: 5}) == [(0, 100, 110), (2, 100, 105)]


def test_min_partitions_gives_each_range_its_share_rounded_down():
    # the split of onceflow 0.x, kept as it is: a query restarted after a crash re-plans its
    # last batch with it (Spark would keep the two small ranges whole and cut the large one in 4)
    sizes = {0: 10, 1: 10, 2: 100}
    tasks = _plan(sizes, min_partitions=6)
    assert tasks == [
        (0, 100, 110),
        (1, 100, 110),
        (2, 100, 120),
        (2, 120, 140),
        (2, 140, 160),
        (2, 160, 180),
        (2, 180, 200),
    ]


def test_min_partitions_split_is_pinned():
    # tasks per partition for a mixed batch; a change here re-plans replayed batches differently
    tasks = _plan({0: 7, 1: 1000, 2: 333, 3: 0}, min_partitions=10)
    assert [sum(1 for t in tasks if t[0] == p) for p in range(4)] == [1, 7, 2, 0]
    assert [b - a for p, a, b in tasks if p == 1] == [142, 143, 143, 143, 143, 143, 143]


def test_min_partitions_not_above_the_partition_count_changes_nothing():
    assert _plan({0: 10, 1: 1000}, min_partitions=2) == [(0, 100, 110), (1, 100, 1100)]


def test_max_records_per_partition_caps_every_task():
    sizes = {0: 95, 1: 10, 2: 30}
    tasks = _plan(sizes, max_records=30)
    assert all(b - a <= 30 for _, a, b in tasks) and _covers(tasks, sizes)
    assert [t for t in tasks if t[0] == 0] == [
        (0, 100, 123),
        (0, 123, 147),
        (0, 147, 171),
        (0, 171, 195),
    ]
    assert [t for t in tasks if t[0] != 0] == [(1, 100, 110), (2, 100, 130)]


def test_min_partitions_splits_again_after_max_records_per_partition():
    # max first: 2 + 1 ranges of 100; then 9 tasks are asked for: 3 from each
    sizes = {0: 200, 1: 100}
    tasks = _plan(sizes, min_partitions=9, max_records=150)
    assert len(tasks) == 9 and _covers(tasks, sizes)
    assert all(b - a <= 150 for _, a, b in tasks)
    # and when max alone gives enough tasks, min adds none
    assert len(_plan(sizes, min_partitions=3, max_records=100)) == 3


@pytest.mark.parametrize("seed", range(40))
def test_tasks_cover_every_offset_exactly_once(seed):
    import random

    rng = random.Random(seed)
    sizes = {p: rng.choice([0, 1, 2, 7, 50, 999, 12345]) for p in range(rng.randint(1, 6))}
    min_partitions = rng.choice([None, 1, 3, 8, 50])
    max_records = rng.choice([None, 1, 10, 1000])
    tasks = _plan(sizes, min_partitions, max_records)
    assert _covers(tasks, sizes)
    if max_records:
        assert all(b - a <= max_records for _, a, b in tasks)
    assert tasks == _plan(sizes, min_partitions, max_records)  # deterministic


def test_max_records_per_partition_option_is_parsed_and_checked():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    options = parse_source_options({**base, "maxRecordsPerPartition": "500"}, batch=True)
    assert options.max_records_per_partition == 500
    assert parse_source_options(base, batch=True).max_records_per_partition is None
    for bad in ("0", "-3", "many"):
        with pytest.raises(OptionError):
            parse_source_options({**base, "maxRecordsPerPartition": bad}, batch=True)


class _ScriptedAdmin:
    """An AdminClient stand-in: each list_offsets call answers the next error code for every
    partition (NONE: offset 7), as a topic being deleted and created again does."""

    def __init__(self, codes):
        self.codes = list(codes)
        self.describes = 0

    def describe_topics(self, names):
        from onceflow.client.admin import PartitionDescription, TopicDescription
        from onceflow.protocol.errors import ErrorCode

        self.describes += 1
        part = PartitionDescription(0, 1, (1,), (1,))
        return {n: TopicDescription(n, ErrorCode.NONE, partitions=(part,)) for n in names}

    def list_offsets(self, specs, isolation_level=0):
        from onceflow.client.admin import ListOffsetsResult

        code = self.codes.pop(0)
        return {tp: ListOffsetsResult(code, 7 if code == 0 else -1) for tp in specs}

    def close(self):
        pass


def _resolver(codes, retries="3"):
    from onceflow.spark.offsets import OffsetResolver

    options = parse_source_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
         "fetchoffset.numretries": retries, "fetchoffset.retryintervalms": "1"},
        batch=False,
    )  # fmt: skip
    resolver = OffsetResolver(options)
    resolver._admin = _ScriptedAdmin(codes)
    return resolver


def test_latest_offsets_ask_again_when_a_partition_vanishes_between_metadata_and_offsets():
    """A topic deleted (and created again) between the metadata and ListOffsets gives
    UNKNOWN_TOPIC_OR_PARTITION once: the partitions and offsets are asked again, instead of
    failing the query with a data-loss error (seen with failOnDataLoss=false)."""
    from onceflow.protocol.errors import ErrorCode

    resolver = _resolver([ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NONE])
    assert resolver.latest_offsets() == {("t", 0): 7}
    assert resolver._admin.describes == 2


def test_latest_offsets_give_up_after_the_retries():
    from onceflow.protocol.errors import ErrorCode
    from onceflow.spark.offsets import DataLossError

    resolver = _resolver([ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 3, retries="2")
    with pytest.raises(DataLossError, match="UNKNOWN_TOPIC_OR_PARTITION"):
        resolver.latest_offsets()
    other = _resolver([ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.NONE])
    with pytest.raises(DataLossError, match="OFFSET_NOT_AVAILABLE"):  # not a vanished partition
        other.latest_offsets()
