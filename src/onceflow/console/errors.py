"""The console's own error: input a page cannot use."""

from __future__ import annotations


class BadInput(ValueError):
    """A request the console cannot carry out as asked; the message says why, in a sentence
    for the person who asked (the page shows it with status 400)."""
