"""Prometheus' text exposition format (0.0.4), shared by the broker's `/metrics` listener and
the Spark connector's driver-side endpoint: the content type, label escaping and the
HELP/TYPE/sample lines. No I/O."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["CONTENT_TYPE", "escape", "header", "sample"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape(value: str) -> str:
    """A label value escaped as the text format requires."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def header(out: list[str], name: str, kind: str, text: str) -> None:
    """Append the `# HELP` and `# TYPE` lines of metric `name` (`kind`: counter, gauge...)."""
    out.append(f"# HELP {name} {text}")
    out.append(f"# TYPE {name} {kind}")


def sample(name: str, labels: Mapping[str, str], value: float) -> str:
    """One sample line: `name{label="value",...} value`."""
    if not labels:
        return f"{name} {value:g}"
    text = ",".join(f'{k}="{escape(str(v))}"' for k, v in labels.items())
    return f"{name}{{{text}}} {value:g}"
