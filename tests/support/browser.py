"""A headless Chromium for the console's end-to-end tests: Debian's `chromium` driven by
Playwright's Python package (never Playwright's own browser downloads), and where the tests put
their screenshots.

`launch_chromium` skips the calling test, saying why, when the machine has no Chromium (scripts/
setup.sh installs it with apt where it can). The flags keep Chromium from reaching out to the
network, which is closed here and would stall it; Playwright's `launch` gives every browser a
fresh temporary profile (its own `--user-data-dir`). Screenshots go to `.artifacts/console/`
under the repository (git-ignored); with `ONCEFLOW_DOC_SCREENSHOTS=1` the ones the docs embed
are also written to docs/img/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".artifacts" / "console"
DOC_IMAGES = REPO / "docs" / "img"
CHROMIUM_ARGS = [
    "--no-sandbox",  # the tests run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1100, "height": 720}


def chromium_path() -> str | None:
    """Debian's Chromium, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@contextmanager
def launch_chromium() -> Iterator[Any]:
    """A headless Chromium (a Playwright `Browser`); skips the test without one."""
    executable = chromium_path()
    if executable is None:
        pytest.skip("no Chromium on this machine (scripts/setup.sh installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page: Any, name: str, for_docs: bool = False) -> Path:
    """Save the page, as tall as its content, as `.artifacts/console/NAME.png` (copied to
    docs/img/console-NAME.png when `for_docs` and ONCEFLOW_DOC_SCREENSHOTS=1); the artifact's
    path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": 100})  # full_page grows it back
    try:
        page.screenshot(path=str(path), full_page=True)
    finally:
        page.set_viewport_size(size)
    print(f"screenshot: {path}")
    if for_docs and os.environ.get("ONCEFLOW_DOC_SCREENSHOTS") == "1":
        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOC_IMAGES / f"console-{name}.png")
    return path


def table_row(page: Any, table: int, first_cell: str) -> list[str]:
    """The cells of the row of the page's `table`-th table in `<main>` whose first cell is
    `first_cell` (AssertionError when there is none)."""
    for row in page.locator("main table").nth(table).locator("tr").all():
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in table {table}")
