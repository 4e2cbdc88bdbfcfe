"""docs/security.md carries the per-API rules table as `broker.authorization` defines it."""

from __future__ import annotations

from pathlib import Path

from onceflow.broker.authorization import rules_table_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def test_security_doc_has_the_current_rules_table():
    assert rules_table_markdown() in DOC.read_text(), (
        "docs/security.md is stale: paste broker.authorization.rules_table_markdown() "
        "under '### What each API needs'"
    )
