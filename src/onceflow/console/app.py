"""The console's ASGI application (Starlette): each page at its path, its data as JSON under
`/api/`, and `?partial=1` for the page's content alone (what the page polls).

Gathering goes through `cluster` (one shared AdminClient; errors become a short page, or JSON
`{"error": ...}`, with status 400, 404 or 503, never a traceback). The pages that change
something (`actions`) exist only with `allow_actions`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from onceflow.client.admin import AdminClient
from onceflow.common import wall_clock_ms
from onceflow.console import render, render_transactions
from onceflow.console.actions import action_routes
from onceflow.console.broker_metrics import MetricsSource
from onceflow.console.browse import browse, parse_browse_query
from onceflow.console.cluster import ClusterView, Gather, gather
from onceflow.console.groups import list_group_rows
from onceflow.console.markers import list_query_progress
from onceflow.console.overview import gather_overview
from onceflow.console.render import Nav
from onceflow.console.render_actions import browse_main
from onceflow.console.render_metrics import overview_panel, topic_panel
from onceflow.console.topics import describe_topic
from onceflow.console.transactions import page_transactions
from onceflow.console.txn_query import parse_txn_query


def to_json(data: Any) -> Any:
    """Dataclasses (and lists of them) as JSON values."""
    if isinstance(data, list):
        return [to_json(item) for item in data]
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.asdict(data)
    return data


def create_app(
    config: Mapping[str, Any],
    hanging_after_ms: int | None = None,
    allow_actions: bool = False,
    more_nav: Nav = (),
    metrics_url: str | None = None,
) -> Starlette:
    """The console for the cluster `config` (client properties, Kafka's names) describes; with
    `allow_actions`, also its abort and reset-offsets pages (as the identity in `config`);
    `more_nav` links pages mounted next to it (the demo's) in every page's navigation; with
    `metrics_url` (an onceflow broker's /metrics), the overview and topic pages add its
    figures."""
    cluster = ClusterView(config, hanging_after_ms)
    metrics = MetricsSource(metrics_url) if metrics_url else None
    nav = render.NAV + more_nav
    acts = allow_actions

    def overview(admin: AdminClient, request: Request) -> Any:
        now = wall_clock_ms()
        found = gather_overview(admin, now, cluster.threshold_ms(admin), cluster.throughput)
        if metrics is None:
            return found
        with cluster.unlocked(), metrics.lock:
            return dataclasses.replace(found, broker_metrics=metrics.overview())

    def topic(admin: AdminClient, request: Request) -> Any:
        view = describe_topic(admin, request.path_params["topic"], wall_clock_ms())
        if metrics is None:
            return view
        with cluster.unlocked(), metrics.lock:
            return dataclasses.replace(view, broker_metrics=metrics.topic(view.topic))

    def transactions(admin: AdminClient, request: Request) -> Any:
        params = request.query_params
        query = parse_txn_query(params, params.getlist("state"))  # 400 before asking
        return page_transactions(admin, wall_clock_ms(), cluster.threshold_ms(admin), query)

    def messages(admin: AdminClient, request: Request) -> Any:
        query = parse_browse_query(request.path_params["topic"], request.query_params)
        return browse(admin, cluster.config, query, cluster.unlocked)

    pages: list[tuple[str, str, Gather, Callable[[Any, Request], str]]] = [
        ("/", "Overview", overview,
         lambda d, r: render.overview_main(d, overview_panel(d.broker_metrics))),
        ("/topics/{topic}", "Topic", topic,
         lambda d, r: render.topic_main(d, acts) + topic_panel(d.broker_metrics)),
        ("/transactions", "Transactions", transactions,
         lambda d, r: render_transactions.transactions_main(d, acts)),
        ("/groups", "Groups", lambda a, r: list_group_rows(a),
         lambda d, r: render.groups_main(d, acts)),
        ("/spark", "Spark", lambda a, r: list_query_progress(a), lambda d, r: render.spark_main(d)),
    ]  # fmt: skip
    routes = []
    for path, title, fn, show in pages:
        api_path = "/api/overview" if path == "/" else f"/api{path}"
        routes.append(Route(path, _html_endpoint(cluster, title, fn, show, nav)))
        routes.append(Route(api_path, _json_endpoint(cluster, fn)))
    routes.append(Route("/topics/{topic}/messages", _browse_endpoint(cluster, messages, nav)))
    routes.append(Route("/api/topics/{topic}/messages", _json_endpoint(cluster, messages)))
    routes.extend(action_routes(cluster, allow_actions, nav))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        cluster.close()

    return Starlette(routes=routes, lifespan=lifespan)


def _json_endpoint(cluster: ClusterView, fn: Gather) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        data, status, message = await gather(cluster, fn, request)
        if status != 200:
            return JSONResponse({"error": message}, status_code=status)
        return JSONResponse(to_json(data))

    return endpoint


def _html_endpoint(
    cluster: ClusterView,
    title: str,
    fn: Gather,
    show: Callable[[Any, Request], str],
    nav: Nav,
) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        data, status, message = await gather(cluster, fn, request)
        main = show(data, request) if status == 200 else render.error_main(title, message)
        if request.query_params.get("partial") == "1":
            return HTMLResponse(main, status_code=status)
        return HTMLResponse(render.page(title, main, nav=nav), status_code=status)

    return endpoint


def _browse_endpoint(cluster: ClusterView, fn: Gather, nav: Nav) -> Callable[[Request], Any]:
    """The message browser: its form stays on the page whatever went wrong (no polling: a
    browse reads once)."""

    async def endpoint(request: Request) -> Response:
        data, status, message = await gather(cluster, fn, request)
        params = dict(request.query_params)
        main = browse_main(request.path_params["topic"], params, data, message)
        return HTMLResponse(render.page("Messages", main, poll=False, nav=nav), status_code=status)

    return endpoint
