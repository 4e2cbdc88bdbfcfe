"""docs/testing.md's example, run as a user would run it: the Python block written to a file
and given to pytest in a fresh process, with only the installed onceflow and its pytest
plugin (`onceflow_broker`, `onceflow_spark`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "testing.md"

pytestmark = pytest.mark.slow


def test_the_documented_example_passes(tmp_path):
    (block,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    (tmp_path / "test_vip_orders.py").write_text(block)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_vip_orders.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
