"""Prometheus' text exposition format (0.0.4), shared by the broker's `/metrics` listener and
the Spark connector's driver-side endpoint: the content type, label escaping and the
HELP/TYPE/sample lines; and reading such text back (`parse`, for `onceflow.scrape`). No I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CONTENT_TYPE", "Sample", "escape", "header", "parse", "sample"]

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


@dataclass(frozen=True)
class Sample:
    """One sample line read back: the metric name (`_bucket`, `_sum`... included), its labels
    and value."""

    name: str
    labels: Mapping[str, str]
    value: float


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = re.compile(r"\\(.)")


def parse(text: str, only: tuple[str, ...] | None = None) -> list[Sample]:
    """The samples of a text exposition (comments and blank lines skipped); ValueError naming
    the first line that is not a sample. With `only` (name prefixes), other lines are skipped
    unread: a broker with 10 000 partitions writes 50 000 partition samples, which take a
    third of a second to parse, and a reader wanting a dozen figures need not pay for them."""
    samples = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#") or (only is not None and not line.startswith(only)):
            continue
        match = _SAMPLE.match(line)
        found = _sample(match) if match else None
        if found is None:
            raise ValueError(f"line {number} is not a Prometheus sample: {line[:80]!r}")
        samples.append(found)
    return samples


def _sample(match: re.Match[str]) -> Sample | None:
    labels = _labels(match.group(2) or "")
    try:
        value = float(match.group(3))
    except ValueError:
        return None
    return None if labels is None else Sample(match.group(1), labels, value)


def _labels(text: str) -> dict[str, str] | None:
    labels, pos = {}, 0
    while pos < len(text):
        match = _LABEL.match(text, pos)
        if match is None:
            return None
        labels[match.group(1)] = _UNESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], match[2])
        pos = match.end()
    return labels
