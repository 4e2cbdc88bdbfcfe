"""Offset planning is pinned across onceflow versions: a query restarted after an upgrade
re-plans its last batch with the new version's `plan_ranges`, and the exactly-once sink needs
the same rows in the same tasks as before the crash (docs/spark-operations.md, "Upgrading").
The cases below were planned once and recorded in planning_golden.json; a change to
`plan_ranges` that moves any task boundary fails here. Such a change must not ship without a
migration note (stop queries cleanly before upgrading), and the file is then re-recorded with
`python tests/spark/test_spark_planning_stable.py --record`."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from onceflow.spark.offsets import plan_ranges

GOLDEN = Path(__file__).with_name("planning_golden.json")


def cases() -> list[dict]:
    """Fixed inputs: partition counts, range sizes, minPartitions and maxRecordsPerPartition,
    from a seeded generator plus hand-picked edges."""
    rng = random.Random(20261125)
    out = [
        {"sizes": [1], "min": None, "max": None},
        {"sizes": [10, 0, 3], "min": 8, "max": None},
        {"sizes": [7, 7, 7], "min": 32, "max": 2},
        {"sizes": [1000], "min": 3, "max": 333},
    ]
    for _ in range(60):
        sizes = [rng.choice([0, 1, rng.randint(2, 50), rng.randint(51, 100_000)])
                 for _ in range(rng.randint(1, 8))]  # fmt: skip
        largest = max(sizes) or 1
        out.append(
            {
                "sizes": sizes,
                "min": rng.choice([None, 1, 2, 3, 8, 32, 200]),
                # at most about 10 pieces per partition, so the recorded file stays small
                "max": rng.choice([None, None, largest, max(largest // 3, 1),
                                   max(largest // 10, 1)]),
            }
        )  # fmt: skip
    return out


def plan(case: dict) -> list[list]:
    start = {("t", p): 1000 * p for p in range(len(case["sizes"]))}
    end = {("t", p): 1000 * p + n for p, n in enumerate(case["sizes"])}
    return [
        [r.partition, r.from_offset, r.until_offset]
        for r in plan_ranges(start, end, case["min"], case["max"])
    ]


def test_planning_matches_the_recorded_plans():
    recorded = json.loads(GOLDEN.read_text())
    assert [c["case"] for c in recorded] == cases()
    changed = [c["case"] for c in recorded if plan(c["case"]) != c["tasks"]]
    assert not changed, f"plan_ranges cuts these batches differently now: {changed[:3]}"


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    GOLDEN.write_text(json.dumps([{"case": c, "tasks": plan(c)} for c in cases()]) + "\n")
