"""The batch sink under a driver crash (`df.write.format("onceflow")`, the demo's transform as
one batch job in a separate driver process): with the `jobId` option a re-run of a job killed
while committing finishes it exactly once, a re-run of a finished job writes nothing, and a
re-run that would write other rows is refused."""

from __future__ import annotations

import pytest
from support.peers import ONCEFLOW

from spark.pipeline_helpers import Pipeline, assert_exactly_once

pytestmark = pytest.mark.slow

JOB = ["--batch", "--job-id", "orders-2026-11-25"]
RUNS = 3  # a run that fails for Spark's own reasons on a loaded machine is run again


def _killed_mid_commit(p: Pipeline, *args: str) -> None:
    """Run the job until the driver is killed in its commit pool, task partition 2's commit
    held back and the others committed."""
    for _attempt in range(RUNS):
        outcome = p.run(*args, faults="driver.between_commits@0:2")
        if outcome.fault is not None:
            break
    assert outcome.fault == "driver.between_commits@0:2", (outcome, p.log_tail())
    visible = p.output_ids()
    assert len(visible) == len(set(visible)) < len(p.committed_ids), visible


def _run(p: Pipeline, *args: str) -> None:
    for _attempt in range(RUNS):
        outcome = p.run(*args)
        if outcome.exit_code == 0:
            break
    assert outcome.exit_code == 0, (outcome, p.log_tail())


def test_rerun_of_a_job_killed_mid_commit_finishes_it_once(pipeline: Pipeline) -> None:
    p = pipeline
    _killed_mid_commit(p, *JOB)
    _run(p, *JOB)
    assert_exactly_once(p)
    _run(p, *JOB)  # the job is done: running it again writes nothing
    assert_exactly_once(p)


@pytest.mark.parametrize("pipeline", [ONCEFLOW], indirect=True)  # the sink's own check
def test_rerun_with_other_input_is_refused(pipeline: Pipeline) -> None:
    """More input arrived before the re-run: the tasks' rows differ from the committed
    shares, and the job fails naming the job id instead of writing a mix."""
    p = pipeline
    _killed_mid_commit(p, *JOB)
    before = sorted(p.output_ids())
    p.feed(30)
    outcome = p.run(*JOB)
    assert outcome.exit_code not in (0, None), (outcome, p.log_tail())
    log = p.log.read_text(errors="replace")
    assert "jobId 'orders-2026-11-25'" in log and "use a new jobId" in log, p.log_tail()
    assert sorted(p.output_ids()) == before
