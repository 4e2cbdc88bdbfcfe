"""Reading Prometheus' text format in tests: the samples of a scrape."""

from __future__ import annotations


def parse_samples(text: str) -> dict[str, float]:
    """`name{labels}` -> value of every sample line of a text exposition."""
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples
