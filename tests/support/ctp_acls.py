"""The ACLs of a consume-transform-produce application, read from docs/security.md, so the
tests that run the application under ACLs check the table the docs give users, not a copy.

The section "### The ACLs of a consume-transform-produce application" names the principal in
its first sentence (the first `User:...` in backquotes) and has a table of `resource | name |
operations`; an operation cell starts with Kafka's operation name (`READ (DESCRIBE implied)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
SECTION = "### The ACLs of a consume-transform-produce application"


@dataclass(frozen=True)
class DocAcl:
    """One ALLOW ACL of the table: `resource_type` and `operation` are Kafka's upper-case names."""

    resource_type: str
    name: str
    operation: str

    @property
    def label(self) -> str:
        return f"{self.operation}-{self.resource_type}-{self.name}"


@dataclass(frozen=True)
class CtpAcls:
    principal: str
    acls: tuple[DocAcl, ...]

    def _one(self, resource_type: str, operation: str | None = None) -> str:
        [name] = [
            acl.name
            for acl in self.acls
            if acl.resource_type == resource_type and operation in (None, acl.operation)
        ]
        return name

    @property
    def user(self) -> str:
        return self.principal.removeprefix("User:")

    @property
    def input_topic(self) -> str:
        return self._one("TOPIC", "READ")

    @property
    def output_topic(self) -> str:
        return self._one("TOPIC", "WRITE")

    @property
    def group(self) -> str:
        return self._one("GROUP")

    @property
    def transactional_id(self) -> str:
        return self._one("TRANSACTIONAL_ID")


def section_text(doc: Path = SECURITY_DOC) -> str:
    """The section's text, up to the next heading."""
    text = doc.read_text()
    start = text.index(SECTION) + len(SECTION)
    end = re.compile(r"^#{1,3} ", re.M).search(text, start)
    return text[start : end.start() if end else len(text)]


def read_ctp_acls(doc: Path = SECURITY_DOC) -> CtpAcls:
    """The principal and ACLs the docs list for a consume-transform-produce application."""
    text = section_text(doc)
    principal = re.search(r"`(User:[^`]+)`", text)
    if principal is None:
        raise ValueError(f"no `User:...` principal in {SECTION!r}")
    acls = []
    for cells in re.findall(r"^\|([^|\n]+)\|([^|\n]+)\|([^|\n]+)\|$", text, re.M):
        resource, name, operations = (cell.strip() for cell in cells)
        if resource in ("resource", "---"):
            continue
        acls.append(DocAcl(resource, name.strip("`"), operations.split()[0]))
    if not acls:
        raise ValueError(f"no ACL table in {SECTION!r}")
    return CtpAcls(principal[1], tuple(acls))
