"""The static checks run with the tests, so `.ci/run` fails on any of them.

`ruff check` (lint), `ruff format --check` (formatting) and `mypy` (types; configured in
pyproject.toml: strict for the wire core, the coordinators and the client's network and
transaction layers) each run as a subprocess from the repository root; a failure shows the
tool's own output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the Python trees; ruff would also format the code blocks in docs/*.md
PYTHON_TREES = ["src", "tests", "tools", "bench"]

CHECKS = {
    "ruff-lint": ["ruff", "check", *PYTHON_TREES],
    "ruff-format": ["ruff", "format", "--check", *PYTHON_TREES],
    "mypy": ["mypy"],
}


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_static_check_passes(name: str) -> None:
    command = [sys.executable, "-m", *CHECKS[name]]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(CHECKS[name])} failed:\n{done.stdout}{done.stderr}"
