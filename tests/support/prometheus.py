"""Reading Prometheus' text format in tests: the samples of a scrape."""

from __future__ import annotations

import re
from collections.abc import Iterator

# a sample line as the broker writes it: name, optional {labels}, a plain decimal value
_BROKER_SAMPLE = re.compile(r'^[a-z_]+(\{([a-z_]+="(?:[^"\\]|\\.)*",?)*\})? -?\d+(\.\d+)?$')


def sample_lines(text: str, strict: bool = False) -> Iterator[tuple[str, str]]:
    """(`name{labels}`, value text) of every sample line; `strict` asserts each line has the
    broker's syntax."""
    for line in text.splitlines():
        if line and not line.startswith("#"):
            assert not strict or _BROKER_SAMPLE.match(line), f"not a sample line: {line!r}"
            name, value = line.rsplit(" ", 1)
            yield name, value


def parse_samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value of every sample line of a text exposition."""
    return {name: float(value) for name, value in sample_lines(text)}
