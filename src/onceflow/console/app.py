"""The console's ASGI application (Starlette): each page at its path, its data as JSON under
`/api/`, and `?partial=1` for the page's content alone (what the page polls).

The `AdminClient` is synchronous and shared, so gathering runs in Starlette's thread pool, one
request to the cluster at a time. A cluster that cannot be reached, or an unknown topic, gives
a short page (or JSON `{"error": ...}`) with status 503 or 404, never a traceback.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from onceflow.client.admin import AdminClient
from onceflow.client.error_base import KafkaError
from onceflow.client.errors import BrokerResponseError
from onceflow.common import wall_clock_ms
from onceflow.console import render
from onceflow.console.groups import list_group_rows
from onceflow.console.markers import list_query_progress
from onceflow.console.overview import gather_overview
from onceflow.console.topics import UnknownTopic, describe_topic
from onceflow.console.transactions import (
    TransactionsView,
    hanging_threshold_ms,
    list_transaction_rows,
)

Gather = Callable[[AdminClient, Request], Any]


class ClusterView:
    """One `AdminClient` for the console's lifetime, used by one gathering at a time."""

    def __init__(self, config: Mapping[str, Any], hanging_after_ms: int | None) -> None:
        self._config = dict(config)
        self._hanging_after_ms = hanging_after_ms
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None

    def run(self, gather: Gather, request: Request) -> Any:
        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(self._config)
            return gather(self._admin, request)

    def threshold_ms(self, admin: AdminClient) -> int:
        """The hanging threshold, looked up once (a broker's transaction.max.timeout.ms is a
        static setting)."""
        if self._hanging_after_ms is None:
            self._hanging_after_ms = hanging_threshold_ms(admin, None)
        return self._hanging_after_ms

    def close(self) -> None:
        with self._lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None


def to_json(data: Any) -> Any:
    """Dataclasses (and lists of them) as JSON values."""
    if isinstance(data, list):
        return [to_json(item) for item in data]
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.asdict(data)
    return data


def create_app(config: Mapping[str, Any], hanging_after_ms: int | None = None) -> Starlette:
    """The console for the cluster `config` (client properties, Kafka's names) describes."""
    cluster = ClusterView(config, hanging_after_ms)

    def overview(admin: AdminClient, request: Request) -> Any:
        return gather_overview(admin, wall_clock_ms(), cluster.threshold_ms(admin))

    def topic(admin: AdminClient, request: Request) -> Any:
        return describe_topic(admin, request.path_params["topic"], wall_clock_ms())

    def transactions(admin: AdminClient, request: Request) -> Any:
        threshold = cluster.threshold_ms(admin)
        rows = list_transaction_rows(admin, wall_clock_ms(), threshold)
        return TransactionsView(threshold, rows)

    def show_transactions(view: TransactionsView, request: Request) -> str:
        return render.transactions_main(
            view, only_hanging=request.query_params.get("hanging") == "1"
        )

    pages: list[tuple[str, str, Gather, Callable[[Any, Request], str]]] = [
        ("/", "Overview", overview, lambda d, r: render.overview_main(d)),
        ("/topics/{topic}", "Topic", topic, lambda d, r: render.topic_main(d)),
        ("/transactions", "Transactions", transactions, show_transactions),
        ("/groups", "Groups", lambda a, r: list_group_rows(a), lambda d, r: render.groups_main(d)),
        ("/spark", "Spark", lambda a, r: list_query_progress(a), lambda d, r: render.spark_main(d)),
    ]  # fmt: skip
    routes = []
    for path, title, gather, show in pages:
        api_path = "/api/overview" if path == "/" else f"/api{path}"
        routes.append(Route(path, _html_endpoint(cluster, title, gather, show)))
        routes.append(Route(api_path, _json_endpoint(cluster, gather)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        cluster.close()

    return Starlette(routes=routes, lifespan=lifespan)


async def _gather(cluster: ClusterView, gather: Gather, request: Request) -> tuple[Any, int, str]:
    """(data, 200, "") or (None, status, message)."""
    try:
        return await run_in_threadpool(cluster.run, gather, request), 200, ""
    except UnknownTopic as exc:
        return None, 404, f"The cluster has no topic {exc.args[0]!r}."
    except (
        KafkaError,
        BrokerResponseError,
        OSError,
    ) as exc:  # OSError: KafkaConnectionError, timeouts
        return None, 503, f"The cluster did not answer: {type(exc).__name__}: {exc}"


def _json_endpoint(cluster: ClusterView, gather: Gather) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        data, status, message = await _gather(cluster, gather, request)
        if status != 200:
            return JSONResponse({"error": message}, status_code=status)
        return JSONResponse(to_json(data))

    return endpoint


def _html_endpoint(
    cluster: ClusterView, title: str, gather: Gather, show: Callable[[Any, Request], str]
) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        data, status, message = await _gather(cluster, gather, request)
        main = show(data, request) if status == 200 else render.error_main(title, message)
        if request.query_params.get("partial") == "1":
            return HTMLResponse(main, status_code=status)
        return HTMLResponse(render.page(title, main), status_code=status)

    return endpoint
