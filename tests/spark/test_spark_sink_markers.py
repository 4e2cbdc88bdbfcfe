"""Replays the sink's progress markers cannot vouch for (issue 19): a batch re-run with another
task layout, a second query under the same prefix, markers gone or moved, a shrunken task
count, a late attempt that fences the accepted one. Each test drives the two-phase protocol
directly (tasks and driver calls, as Spark would make them) against a live broker, and checks
that the output is exactly once and that the sink either wrote the right rows or stopped with
an error naming what changed."""

from __future__ import annotations

import contextlib
import time
import types
from collections import Counter
from collections.abc import Iterable, Sequence

import pyarrow as pa
import pytest
from support.broker import BrokerProcess

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.spark.committer import SinkCommitError, abort_batch, commit_batch
from onceflow.spark.faults import FaultInjected
from onceflow.spark.keepalive import MarkerKeepAlive
from onceflow.spark.markers import query_group
from onceflow.spark.options import parse_sink_options
from onceflow.spark.orders import end_offsets, read_committed, wait_until_stable
from onceflow.spark.twophase import TaskInfo, write_task

TOPICS = (
    "mk-layout",
    "mk-emptied",
    "mk-shrink",
    "mk-vanish",
    "mk-foreign",
    "mk-expiry",
    "mk-moved",
)
TOPICS += ("mk-moved-progress", "mk-late", "mk-alive", "mk-retarget-a", "mk-retarget-b")


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    broker = BrokerProcess(
        tmp_path_factory.mktemp("markers") / "data", {"transaction.state.log.num.partitions": 4}
    )
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        for name in TOPICS:
            assert admin.create_topics([NewTopic(name, 2, 1)])[name].ok
    yield broker.bootstrap
    broker.stop()


def _options(bootstrap: str, topic: str, **extra: str):
    return parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic, **extra})


def _rows(ids: Iterable[int]):
    ids = list(ids)
    for i in range(0, len(ids), 7):
        chunk = [b"%d" % n for n in ids[i : i + 7]]
        yield pa.RecordBatch.from_pydict({"key": [b"k"] * len(chunk), "value": chunk})


def _tasks(options, query: str, batch: int, prefix: str, shares: Sequence[Iterable[int]]):
    """Run every task of a batch: one list of ids per task partition."""
    return [
        write_task(options, TaskInfo(query, batch, p, 0), prefix, _rows(ids))
        for p, ids in enumerate(shares)
    ]


def _run_batch(options, query, batch, prefix, shares) -> BaseException | None:
    """A batch as Spark runs it: the tasks, then commit; a failed task or commit makes Spark
    call abort (with None for a task that failed) and stop the query. Returns the error."""
    messages = [None] * len(shares)
    try:
        for p, ids in enumerate(shares):
            messages[p] = write_task(options, TaskInfo(query, batch, p, 0), prefix, _rows(ids))
        commit_batch(options, messages, batch)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        abort_batch(options, messages, batch, prefix)
        return exc
    return None


def _crash_after_commit(options, query, batch, prefix, shares) -> None:
    """Batch `batch` fully committed, then the driver died before Spark recorded it."""
    with contextlib.suppress(FaultInjected):
        commit_batch(options, _tasks(options, query, batch, prefix, shares), batch)


def _output(bootstrap: str, topic: str) -> Counter:
    return Counter(int(r.value) for r in read_committed(bootstrap, topic, 2))


def _assert_exactly(bootstrap: str, topic: str, ids: Iterable[int]) -> None:
    wait_until_stable(bootstrap, topic, 2)
    got = _output(bootstrap, topic)
    duplicates = sorted(i for i, n in got.items() if n > 1)
    missing = sorted(set(ids) - set(got))
    unexpected = sorted(set(got) - set(ids))
    assert (duplicates, missing, unexpected) == ([], [], []), (
        f"{len(duplicates)} duplicates, {len(missing)} missing, {len(unexpected)} unexpected"
    )
    lso, hw = (end_offsets(bootstrap, topic, 2, c) for c in (True, False))
    assert lso == hw, f"open transactions left on {topic}: LSO {lso} != HW {hw}"


def _delete_groups(bootstrap: str, prefix: str, only: str | None = None) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        groups = [g.group_id for g in admin.list_groups() if prefix in g.group_id]
        groups = [g for g in groups if only is None or g == only]
        assert groups
        admin.delete_groups(groups)


def test_replay_with_another_task_layout_is_an_error_not_duplicates(bootstrap):
    """Batch 0's driver died after committing task 0's share of two; the restart cuts the same
    40 rows into three tasks (maxRecordsPerPartition). Task 0's marker covers rows that are
    now spread over tasks 0 and 1: the replay must stop, naming the change; restoring the
    setting then finishes the batch exactly once."""
    topic, prefix = "mk-layout", "t-layout"
    faulty = _options(bootstrap, topic, **{"onceflow.faults": "driver.between_commits@0=raise"})
    first = _tasks(faulty, "q-layout", 0, prefix, [range(0, 20), range(20, 40)])
    with pytest.raises(FaultInjected):
        commit_batch(faulty, first, 0)  # task 0's share committed, task 1's not
    options = _options(bootstrap, topic)
    error = _run_batch(options, "q-layout", 0, prefix, [range(0, 10), range(10, 30), range(30, 40)])
    _assert_exactly(bootstrap, topic, range(0, 20))  # nothing more than the first commit
    assert error is not None and "task partition 0 of batch 0" in str(error), error
    assert "20 rows" in str(error) and "10 rows" in str(error), error
    # the documented recovery: restart with the layout the batch was first planned with
    assert _run_batch(options, "q-layout", 0, prefix, [range(0, 20), range(20, 40)]) is None
    _assert_exactly(bootstrap, topic, range(0, 40))


def test_a_task_that_committed_rows_and_is_empty_in_the_replay(bootstrap):
    """Task 0 committed its 10 rows of batch 0 before the crash; after the restart all 20
    rows of the batch land in task 1 and task 0 has none. Task 0 writes nothing either way,
    but it must not let task 1 write its rows a second time."""
    topic, prefix = "mk-emptied", "t-emptied"
    faulty = _options(bootstrap, topic, **{"onceflow.faults": "driver.between_commits@0=raise"})
    first = _tasks(faulty, "q-emptied", 0, prefix, [range(0, 10), range(10, 20)])
    with pytest.raises(FaultInjected):
        commit_batch(faulty, first, 0)
    options = _options(bootstrap, topic)
    error = _run_batch(options, "q-emptied", 0, prefix, [[], range(0, 20)])
    _assert_exactly(bootstrap, topic, range(0, 10))
    assert error is not None and "it committed 10 rows, the re-run has 0 rows" in str(error)
    assert _run_batch(options, "q-emptied", 0, prefix, [range(0, 10), range(10, 20)]) is None
    _assert_exactly(bootstrap, topic, range(0, 20))


def test_replay_with_fewer_tasks_after_all_commits_is_an_error(bootstrap):
    """Batch 0 committed by three tasks (two of them empty), then the driver died before Spark
    recorded it; the restart plans two tasks. No task of the replay has a marker for its
    share, yet the share of the vanished task 2 is in the output."""
    topic, prefix = "mk-shrink", "t-shrink"
    faulty = _options(bootstrap, topic, **{"onceflow.faults": "driver.after_commit@0=raise"})
    _crash_after_commit(faulty, "q-shrink", 0, prefix, [[], [], range(0, 30)])
    options = _options(bootstrap, topic)
    error = _run_batch(options, "q-shrink", 0, prefix, [range(0, 30), []])
    _assert_exactly(bootstrap, topic, range(0, 30))
    assert error is not None and "3 task partitions" in str(error), error
    assert _run_batch(options, "q-shrink", 0, prefix, [[], [], range(0, 30)]) is None
    _assert_exactly(bootstrap, topic, range(0, 30))


def test_transactions_of_vanished_task_ids_are_aborted(bootstrap):
    """Batch 0's three tasks prepared, the driver died before committing; the restart plans
    two tasks. Task 2's prepared transaction must not pin the output's last stable offset."""
    topic, prefix = "mk-vanish", "t-vanish"
    options = _options(bootstrap, topic)
    _tasks(options, "q-vanish", 0, prefix, [range(0, 10), range(10, 20), range(20, 30)])
    assert _run_batch(options, "q-vanish", 0, prefix, [range(0, 15), range(15, 30)]) is None
    _assert_exactly(bootstrap, topic, range(0, 30))


def test_a_second_query_under_the_same_prefix_refuses_to_start(bootstrap):
    """Query A committed batches 0-2 under the prefix `shared`; query B (a new checkpoint,
    the prefix kept) must not take A's markers for its own and skip its rows."""
    topic, prefix = "mk-foreign", "t-shared"
    options = _options(bootstrap, topic)
    for batch in range(3):
        ids = range(batch * 10, batch * 10 + 10)
        assert _run_batch(options, "query-a", batch, prefix, [ids, []]) is None
    error = _run_batch(options, "query-b", 0, prefix, [range(100, 110), range(110, 120)])
    _assert_exactly(bootstrap, topic, range(0, 30))
    assert error is not None and "query-a" in str(error) and "query-b" in str(error), error
    assert _run_batch(options, "query-b", 0, "t-other", [range(100, 120)]) is None
    _assert_exactly(bootstrap, topic, [*range(0, 30), *range(100, 120)])


def test_markers_gone_before_a_replay_is_an_error(bootstrap):
    """Batch 1 committed, the driver died before Spark recorded it, and the markers expired
    (offsets.retention.minutes; deleted here) before the restart: re-writing the batch would
    duplicate it."""
    topic, prefix = "mk-expiry", "t-expiry"
    options = _options(bootstrap, topic)
    assert _run_batch(options, "q-exp", 0, prefix, [range(0, 10), range(10, 20)]) is None
    faulty = _options(bootstrap, topic, **{"onceflow.faults": "driver.after_commit@1=raise"})
    _crash_after_commit(faulty, "q-exp", 1, prefix, [range(20, 30), range(30, 40)])
    _delete_groups(bootstrap, prefix)
    error = _run_batch(options, "q-exp", 1, prefix, [range(20, 30), range(30, 40)])
    _assert_exactly(bootstrap, topic, range(0, 40))
    assert error is not None and "offsets.retention.minutes" in str(error), error


def test_markers_moved_by_a_changed_progress_topic_is_an_error(bootstrap):
    """Batch 1 committed with progressTopic=mk-moved-progress, the driver died before Spark
    recorded it, and the query restarts without progressTopic (markers on mk-moved)."""
    topic, prefix = "mk-moved", "t-moved"
    options = _options(bootstrap, topic, progressTopic="mk-moved-progress")
    assert _run_batch(options, "q-moved", 0, prefix, [range(0, 10)]) is None
    faulty = _options(
        bootstrap, topic, progressTopic="mk-moved-progress",
        **{"onceflow.faults": "driver.after_commit@1=raise"},
    )  # fmt: skip
    _crash_after_commit(faulty, "q-moved", 1, prefix, [range(10, 20)])
    error = _run_batch(_options(bootstrap, topic), "q-moved", 1, prefix, [range(10, 20)])
    _assert_exactly(bootstrap, topic, range(0, 20))
    assert error is not None and "mk-moved-progress" in str(error), error
    assert _run_batch(options, "q-moved", 1, prefix, [range(10, 20)]) is None
    _assert_exactly(bootstrap, topic, range(0, 20))


def test_a_changed_topic_option_is_an_error(bootstrap):
    """Batch 1 committed to topic mk-retarget-a (markers on progressTopic mk-moved-progress),
    the driver died before Spark recorded it, and the query restarts with topic
    mk-retarget-b: the committed shares must not be written again to the new topic."""
    prefix, progress = "t-retarget", {"progressTopic": "mk-moved-progress"}
    old = _options(bootstrap, "mk-retarget-a", **progress)
    assert _run_batch(old, "q-retarget", 0, prefix, [range(0, 10)]) is None
    faulty = _options(
        bootstrap, "mk-retarget-a", **progress, **{"onceflow.faults": "driver.after_commit@1=raise"}
    )
    _crash_after_commit(faulty, "q-retarget", 1, prefix, [range(10, 20)])
    new = _options(bootstrap, "mk-retarget-b", **progress)
    error = _run_batch(new, "q-retarget", 1, prefix, [range(10, 20)])
    assert error is not None and "'mk-retarget-a', now 'mk-retarget-b'" in str(error), error
    _assert_exactly(bootstrap, "mk-retarget-b", [])
    assert _run_batch(old, "q-retarget", 1, prefix, [range(10, 20)]) is None
    assert _run_batch(new, "q-retarget", 2, prefix, [range(20, 30)]) is None  # changed after
    _assert_exactly(bootstrap, "mk-retarget-a", range(0, 20))
    _assert_exactly(bootstrap, "mk-retarget-b", range(20, 30))


def test_a_late_attempt_that_fences_the_accepted_one(bootstrap):
    """Spark accepted attempt 0 of task 0, but a late attempt 1 (a lost executor's task run
    again) started meanwhile and fenced it: the commit fails with an error that says so, the
    abort leaves no open transaction, and the restart writes the batch exactly once."""
    topic, prefix = "mk-late", "t-late"
    options = _options(bootstrap, topic)
    accepted = write_task(options, TaskInfo("q-late", 0, 0, 0), prefix, _rows(range(0, 10)))
    write_task(options, TaskInfo("q-late", 0, 0, 1), prefix, _rows(range(0, 10)))  # the late one
    with pytest.raises(SinkCommitError, match="later attempt") as raised:
        commit_batch(options, [accepted], 0)
    assert "restart the query" in str(raised.value)
    abort_batch(options, [accepted], 0, prefix)
    _assert_exactly(bootstrap, topic, [])
    assert _run_batch(options, "q-late", 0, prefix, [range(0, 10)]) is None
    _assert_exactly(bootstrap, topic, range(0, 10))


def test_an_idle_query_kept_alive_runs_its_next_batch(bootstrap):
    """A query committed batches 0 and 1, then its input went quiet for longer than
    offsets.retention.minutes: the driver's query marker expired (deleted here). Without a
    keep-alive the next batch is refused ("gone") until restarted with the documented
    recreateMarkersAtBatch; with MarkerKeepAlive running while the query is idle, the next
    batches run."""
    topic, prefix = "mk-alive", "t-alive"
    options = _options(bootstrap, topic)
    sink_options = {"kafka.bootstrap.servers": bootstrap, "topic": topic}
    sink_options["transactional.id.prefix"] = prefix
    for batch in range(2):
        ids = range(batch * 10, batch * 10 + 10)
        assert _run_batch(options, "q-alive", batch, prefix, [ids, []]) is None
    _delete_groups(bootstrap, prefix, only=query_group(prefix))
    error = _run_batch(options, "q-alive", 2, prefix, [range(20, 30), []])
    assert error is not None and "gone" in str(error), error
    recover = _options(bootstrap, topic, recreateMarkersAtBatch="2")
    assert _run_batch(recover, "q-alive", 2, prefix, [range(20, 30), []]) is None
    query = types.SimpleNamespace(id="q-alive", isActive=True)
    with MarkerKeepAlive(query, sink_options, interval_s=0.05) as keeper:
        deadline = time.monotonic() + 30
        while keeper.refreshed == 0:
            assert time.monotonic() < deadline, "the keep-alive never refreshed the marker"
            time.sleep(0.05)
    _delete_groups(bootstrap, prefix, only=query_group(prefix))  # expired; the copy lives
    for batch in (3, 4):
        ids = range(batch * 10, batch * 10 + 10)
        assert _run_batch(options, "q-alive", batch, prefix, [ids, []]) is None
    _assert_exactly(bootstrap, topic, range(0, 50))
