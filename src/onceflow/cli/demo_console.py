"""`onceflow demo --console HOST:PORT`: the web console against the demo's cluster for the
demo's duration, plus a /demo page (and /api/demo) with the demo's phase and the same
timeline as its HTML report, redrawn as the console's pages are (render.REFRESH_MS).

The console app (`onceflow.console.app`) is mounted as it is and served from a thread
(`onceflow.console.server.ConsoleServer`) that stops with the demo (`stop`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from html import escape
from typing import TYPE_CHECKING

from onceflow.cli.demo_report import counts_table, events_table, timeline_svg
from onceflow.cli.demo_timeline import Timeline
from onceflow.console.server import ConsoleServer

if TYPE_CHECKING:  # the console extra is imported only when asked for
    from starlette.applications import Starlette

DEMO_NAV = (("/demo", "Demo"),)  # in the console's navigation while /demo is mounted


def demo_main(run: Timeline) -> str:
    """The /demo page's content: phase, counts once checked, timeline, events (the console's
    pages poll their content with ?partial=1 and redraw it)."""
    summary = run.summary
    verdict = ""
    if "ok" in summary:
        verdict = "PASSED" if summary["ok"] else "FAILED: " + "; ".join(summary["problems"])
        verdict = f"<p><b>exactly-once check {escape(verdict)}</b></p>"
    return (
        f"<h1>Demo</h1><p>Phase: <b>{escape(run.phase)}</b>, "
        f"{len(run.batches)} micro-batches committed, "
        f"{time.time() - run.started:.0f} s since the start.</p>{verdict}"
        f"{counts_table(run)}<h2>Timeline</h2>{timeline_svg(run)}"
        f"<h2>Events</h2>{events_table(run)}"
    )


class DemoConsole:
    """The console for `bootstrap` (with the broker's `metrics_url`, the embedded broker's),
    with the /demo page of the demo run `timeline` (which the demo goes on adding to), served
    from a thread."""

    def __init__(self, bootstrap: str, timeline: Timeline, metrics_url: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.timeline = timeline
        self.metrics_url = metrics_url
        self._server: ConsoleServer | None = None

    def app(self) -> Starlette:
        """The console's routes under /, and /demo and /api/demo first; the console's
        lifespan (which keeps no state) is the app's."""
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import HTMLResponse, JSONResponse
        from starlette.routing import Mount, Route

        from onceflow.console import render
        from onceflow.console.app import create_app

        timeline = self.timeline

        async def page(request: Request) -> HTMLResponse:
            main = demo_main(timeline.snapshot())
            if request.query_params.get("partial") == "1":
                return HTMLResponse(main)
            return HTMLResponse(render.page("Demo", main, nav=render.NAV + DEMO_NAV))

        async def api(request: Request) -> JSONResponse:
            return JSONResponse(timeline.to_json())

        console = create_app(
            {"bootstrap.servers": self.bootstrap}, more_nav=DEMO_NAV, metrics_url=self.metrics_url
        )

        @contextlib.asynccontextmanager
        async def lifespan(_app: Starlette) -> AsyncIterator[None]:
            async with console.router.lifespan_context(console):
                yield

        return Starlette(
            routes=[Route("/demo", page), Route("/api/demo", api), Mount("/", app=console)],
            lifespan=lifespan,
        )

    def start(self, host: str, port: int) -> None:
        """Serve on host:port; returns once the server listens (an address in use raises
        OSError)."""
        self._server = ConsoleServer(self.app(), name="demo-console")
        self._server.start(host, port)

    def stop(self) -> None:
        """Stop serving (requests in progress finish)."""
        if self._server is not None:
            self._server.stop()
        self._server = None
