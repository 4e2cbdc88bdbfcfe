"""The progress markers' format and the task spool, without a broker: fingerprints that do
not depend on row order, metadata within Kafka's default offset.metadata.max.bytes, refusal
of metadata this version does not write, and a spool that spills to a file and cleans up."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from onceflow.common import wall_clock_ms
from onceflow.spark.markers import (
    GROUP_PREFIX,
    MarkerError,
    QueryMarker,
    RowDigest,
    TaskMarker,
    query_group,
    task_group,
)
from onceflow.spark.spool import Spool

ROWS = [("t", b"v%d" % i, b"k%d" % (i % 3), None, None) for i in range(50)]


def _digest(rows) -> RowDigest:
    digest = RowDigest()
    for row in rows:
        digest.add(*row)
    return digest


def test_row_digest_ignores_order_but_not_content():
    forward, backward = _digest(ROWS), _digest(reversed(ROWS))
    assert (forward.rows, forward.hexdigest) == (backward.rows, backward.hexdigest)
    changed = _digest([*ROWS[:-1], ("t", b"other", b"k0", None, None)])
    assert changed.rows == forward.rows and changed.hexdigest != forward.hexdigest
    moved = _digest([*ROWS[:-1], ("t", *ROWS[-1][1:3], 2, None)])  # another partition
    assert moved.hexdigest != forward.hexdigest


def test_marker_metadata_round_trips_within_kafka_limit():
    prefix = "p" * 200  # a long transactional.id.prefix does not go into the metadata
    task = TaskMarker("8c5f" * 9, 123456789, 10**9, "f" * 16, "t" * 249, (2**62, 32767))
    committed = task.committed()
    assert committed.offset == 123456790 and len(committed.metadata.encode()) < 4096
    assert TaskMarker.parse(task_group(prefix, 7), committed.metadata) == task
    query = QueryMarker("8c5f" * 9, 41, 200)
    offset, metadata = query.committed()
    assert offset == 42 and QueryMarker.parse(query_group(prefix), metadata) == query


def test_markers_record_when_they_were_written_and_copies_keep_it():
    before = wall_clock_ms()
    written = TaskMarker.parse("g", TaskMarker("q", 3, 1, "d", "t", (1, 0)).committed().metadata)
    assert written.written_ms is not None and before <= written.written_ms <= wall_clock_ms()
    copy = QueryMarker.parse(
        "g", QueryMarker("q", 3, 2, written_ms=1_700_000_000_123).committed()[1]
    )
    assert copy.written_ms == 1_700_000_000_123
    # a marker written before the field existed: the same marker, no time
    old = '{"onceflow":1,"kind":"query","query":"q","batch":3,"tasks":2}'
    parsed = QueryMarker.parse("g", old)
    assert parsed == QueryMarker("q", 3, 2) and parsed.written_ms is None


def test_marker_groups_share_a_filterable_prefix():
    names = {task_group("a", 1), task_group("a.task-1", 0), query_group("a"), query_group("a.1")}
    assert len(names) == 4 and all(n.startswith(GROUP_PREFIX) for n in names)


@pytest.mark.parametrize(
    "metadata", ["onceflow spark sink: batch 4", "", '{"onceflow": 1, "kind": "query"}']
)
def test_metadata_of_another_writer_is_refused(metadata):
    with pytest.raises(MarkerError, match="not one this onceflow version writes"):
        TaskMarker.parse("onceflow-markers.x.task-0", metadata)


def test_spool_spills_to_a_file_keeps_order_and_removes_it():
    batches = [pa.RecordBatch.from_pydict({"value": [b"%d" % i] * 100}) for i in range(6)]
    empty = pa.RecordBatch.from_pydict({"value": pa.array([], pa.binary())})
    with Spool([batches[0], empty, *batches[1:]], memory_bytes=batches[0].nbytes * 2) as spool:
        assert spool.path is not None and os.path.exists(spool.path)
        path = spool.path
        assert spool.rows == 600
        assert [b.column(0)[0].as_py() for b in spool] == [b"%d" % i for i in range(6)]
    assert not os.path.exists(path)
