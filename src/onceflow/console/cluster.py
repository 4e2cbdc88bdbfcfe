"""The console's one connection to the cluster and the gathering every page goes through.

The `AdminClient` is synchronous and shared, so gathering runs in Starlette's thread pool, one
request to the cluster at a time. What the cluster or the person asking got wrong becomes a
status and a sentence (`gather`), never a traceback: an unknown topic 404, input the page cannot
use 400, a cluster that does not answer (or refuses) 503.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from onceflow.client.admin import AdminClient
from onceflow.client.error_base import KafkaError
from onceflow.client.errors import BrokerResponseError
from onceflow.console.errors import BadInput
from onceflow.console.throughput import ThroughputHistory
from onceflow.console.topics import UnknownTopic
from onceflow.console.transactions import hanging_threshold_ms

Gather = Callable[[AdminClient, Request], Any]


class ClusterView:
    """One `AdminClient` for the console's lifetime, used by one gathering at a time; `config`
    is the console's client properties (the browser's consumers start from them too)."""

    def __init__(self, config: Mapping[str, Any], hanging_after_ms: int | None) -> None:
        self.config = dict(config)
        self._hanging_after_ms = hanging_after_ms
        self._lock = threading.Lock()
        self._admin: AdminClient | None = None
        self.throughput = ThroughputHistory()  # measured at each overview poll

    def run(self, gather: Gather, request: Request) -> Any:
        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(self.config)
            return gather(self._admin, request)

    @contextlib.contextmanager
    def unlocked(self) -> Iterator[None]:
        """Inside a gathering (`run`), on its thread: let other gatherings use the admin
        client while this one does slow work that does not touch it (the message browser's
        own consumer reading for up to 10 s)."""
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()

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


async def gather(cluster: ClusterView, fn: Gather, request: Request) -> tuple[Any, int, str]:
    """(data, 200, "") or (None, status, a sentence saying what went wrong)."""
    try:
        return await run_in_threadpool(cluster.run, fn, request), 200, ""
    except UnknownTopic as exc:
        return None, 404, f"The cluster has no topic {exc.args[0]!r}."
    except BadInput as exc:
        return None, 400, str(exc)
    except (
        KafkaError,
        BrokerResponseError,
        OSError,
    ) as exc:  # OSError: KafkaConnectionError, timeouts
        return None, 503, f"The cluster did not answer: {type(exc).__name__}: {exc}"
