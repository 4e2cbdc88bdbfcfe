"""`MarkerKeepAlive`: keeps a running query's progress markers from expiring while it is idle.

Kafka removes a committed offset of a group without members `offsets.retention.minutes` after
its last commit. The driver commits the query marker with every batch, but a streaming query
whose input receives nothing runs no batch; after the retention its marker is gone, and the
next batch fails ("its progress markers ... are gone"). Started in the driver program next to
the query, this thread re-commits the query marker every `interval_s` while the query is
active (`onceflow.spark.markers.refresh_query_marker`):

    query = df.writeStream.format("onceflow").options(**sink_options).start()
    with MarkerKeepAlive(query, sink_options):
        query.awaitTermination()

It does not cover time when the driver is down: a query stopped or crashed for longer than
the retention still needs the recovery in docs/spark.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from onceflow.client.admin import AdminClient
from onceflow.spark.markers import refresh_query_marker
from onceflow.spark.options import parse_sink_options
from onceflow.spark.twophase import default_prefix

__all__ = ["MarkerKeepAlive"]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 3600.0
REQUEST_TIMEOUT_S = 30.0


class MarkerKeepAlive:
    """A daemon thread that refreshes `query`'s query marker (a StreamingQuery: its `id` and
    `isActive` are read) every `interval_s`, with the sink options the query was started
    with. Failures are logged and retried at the next interval."""

    def __init__(
        self, query: Any, sink_options: Mapping[str, str], interval_s: float = DEFAULT_INTERVAL_S
    ) -> None:
        options = parse_sink_options(sink_options)
        self.query = query
        self.prefix = options.transactional_id_prefix or default_prefix(str(query.id))
        self.client = options.client
        self.interval_s = interval_s
        self.refreshed = 0  # how many refreshes committed a marker
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"onceflow-keepalive-{self.prefix}", daemon=True
        )

    def start(self) -> MarkerKeepAlive:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def __enter__(self) -> MarkerKeepAlive:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        with AdminClient(self.client) as admin:
            while not self._stop.wait(self.interval_s) and self.query.isActive:
                try:
                    if refresh_query_marker(admin, self.prefix, REQUEST_TIMEOUT_S) is not None:
                        self.refreshed += 1
                except Exception as exc:  # noqa: BLE001 - logged; the next round retries
                    log.warning("could not refresh the markers of %s: %s", self.prefix, exc)
                    admin.close()
