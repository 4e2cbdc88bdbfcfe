"""The ```python examples of docs/client.md run, in order, in one namespace, against a live
broker whose address they find in `BOOTSTRAP`.

Each block is compiled under the document's own path, padded so that its line numbers are the
document's: a failing example is reported with its traceback through docs/client.md. The examples
assert on what they read back, so an example that stops matching the client fails here.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "client.md"
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the block's first code line, code) for every ```python block."""
    return [
        (text.count("\n", 0, match.start(1)) + 1, match.group(1))
        for match in _PYTHON_BLOCK.finditer(text)
    ]


def test_python_blocks_are_found_with_their_line_numbers():
    text = "intro\n```python\nx = 1\n```\n\n```sh\nls\n```\n```python\ny = 2\nz = 3\n```\n"
    assert python_blocks(text) == [(3, "x = 1\n"), (10, "y = 2\nz = 3\n")]


def test_the_page_has_the_examples_it_promises():
    blocks = python_blocks(DOC.read_text())
    assert len(blocks) >= 6
    code = "".join(block for _line, block in blocks)
    for call in (
        "send_offsets_to_transaction",
        "abort_transaction",
        "resume_transaction",
        "read_committed",
        "TransactionAbortableError",
        "ProducerFencedError",
    ):
        assert call in code, f"no example uses {call}"


@pytest.mark.timeout(300)
def test_client_docs_examples_run_against_a_broker(broker):
    namespace: dict[str, object] = {"__name__": "client_docs", "BOOTSTRAP": broker.bootstrap}
    for line, code in python_blocks(DOC.read_text()):
        compiled = compile("\n" * (line - 1) + code, str(DOC), "exec")
        failure = None
        try:
            exec(compiled, namespace)
        except Exception:
            failure = traceback.format_exc()
        if failure is not None:
            pytest.fail(f"the example at docs/client.md line {line} failed:\n{failure}", False)
