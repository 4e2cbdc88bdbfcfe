"""The connector's figures for Prometheus, served on the driver (source or sink option
`metricsPort`).

PySpark's Python Data Source API lets a Python source put one thing of its own into
`StreamingQueryProgress`: the latest offset it reports (`reportLatestOffset`), where the
source adds its offsets-behind-latest summary. The progress report's `metrics` maps of a source
and a sink (Spark's `ReportsSourceMetrics`, `ReportsSinkMetrics`) are not reachable from
Python, so the sink's figures, and the source's per partition, are served here
(docs/spark-operations.md lists them).

They are computed in the driver's Python processes: the source's planning process (one per
query run) and the Python workers that run the sink's commit and abort (Spark may use another
one for each batch). Each process writes its figures to its own file in
`<temp dir>/onceflow-spark-metrics-<port>/` (replaced whole, at most once per batch); the
first of them to bind the port serves `GET /metrics` on every interface from all the files:
counters summed over the processes, a gauge from the process that set it last. When the
serving process exits, the next one that records binds the port. `python -m
onceflow.spark.metrics --port N` serves the same files from a process of its own (start it
next to the driver for an endpoint that never moves). Files untouched for a day are ignored.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

from onceflow.prometheus import CONTENT_TYPE, header, sample

__all__ = ["METRICS", "Recorder", "metrics_dir", "recorder", "render", "serve"]

log = logging.getLogger(__name__)

STALE_S = 86_400.0


class Metric(NamedTuple):
    kind: str  # counter | gauge
    help: str


METRICS: Mapping[str, Metric] = {
    "onceflow_spark_source_offsets_behind_latest": Metric(
        "gauge",
        "Offsets of the partition between the end of the last planned micro-batch and the "
        "latest offset (the last stable offset with read_committed).",
    ),
    "onceflow_spark_sink_transactions_committed_total": Metric(
        "counter", "Prepared transactions (task shares) the driver committed."
    ),
    "onceflow_spark_sink_transactions_aborted_total": Metric(
        "counter",
        "Transactions the driver ended without committing: the task ids of aborted batches "
        "(fenced with InitProducerId) and commits that found their transaction aborted.",
    ),
    "onceflow_spark_sink_batches_committed_total": Metric(
        "counter", "Micro-batches whose commit finished (replays of committed batches too)."
    ),
    "onceflow_spark_sink_last_committed_batch": Metric(
        "gauge", "The id of the last micro-batch whose commit finished."
    ),
    "onceflow_spark_sink_commit_seconds_sum": Metric(
        "counter", "Seconds spent in the sink's commit (phase two), over all batches."
    ),
    "onceflow_spark_sink_last_commit_seconds": Metric(
        "gauge", "Seconds the last batch's commit took (query marker, EndTxn of every task)."
    ),
    "onceflow_spark_sink_output_lso_lag": Metric(
        "gauge",
        "High watermark minus last stable offset of an output partition, measured right "
        "after the batch's commit: above 0 across batches means a transaction holds "
        "read_committed readers back.",
    ),
}

Labels = tuple[tuple[str, str], ...]


def metrics_dir(port: int) -> Path:
    """Where the driver's processes leave their figures for the endpoint on `port`."""
    return Path(tempfile.gettempdir()) / f"onceflow-spark-metrics-{port}"


class Recorder:
    """This process's figures for one endpoint; `flush()` writes them for the server."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.path = metrics_dir(port) / f"{os.getpid()}.json"
        self._lock = threading.Lock()
        self._series: dict[tuple[str, Labels], tuple[float, float]] = {}  # value, set at

    def add(self, name: str, labels: Mapping[str, Any], amount: float) -> None:
        """Add `amount` to counter `name`."""
        key = (name, _labels(labels))
        with self._lock:
            self._series[key] = (self._series.get(key, (0.0, 0.0))[0] + amount, time.time())

    def set(self, name: str, labels: Mapping[str, Any], value: float) -> None:
        """Set gauge `name`."""
        with self._lock:
            self._series[(name, _labels(labels))] = (float(value), time.time())

    def flush(self) -> None:
        """Write the figures (atomically) and make sure some process serves the port."""
        with self._lock:
            series = [[n, dict(lb), v, at] for (n, lb), (v, at) in sorted(self._series.items())]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"pid": os.getpid(), "series": series}))
            os.replace(tmp, self.path)
        except OSError as exc:  # metrics never fail a batch
            log.warning("could not write Spark connector metrics to %s: %s", self.path, exc)
        _ensure_served(self.port)


def _labels(labels: Mapping[str, Any]) -> Labels:
    return tuple((k, str(v)) for k, v in labels.items())


_recorders: dict[int, Recorder] = {}


def recorder(port: int | None) -> Recorder | None:
    """This process's recorder for the endpoint on `port`; None without one."""
    if port is None:
        return None
    found = _recorders.get(port)
    if found is None:
        found = _recorders[port] = Recorder(port)
    return found


def render(directory: Path) -> str:
    """The text exposition of every process's figures in `directory`."""
    merged: dict[tuple[str, Labels], tuple[float, float]] = {}
    cutoff = time.time() - STALE_S
    for path in sorted(directory.glob("*.json")):
        try:
            if path.stat().st_mtime < cutoff:
                continue
            series = json.loads(path.read_text())["series"]
        except (OSError, ValueError, KeyError):
            continue  # replaced or removed meanwhile
        for name, labels, value, at in series:
            metric = METRICS.get(name)
            if metric is None:
                continue
            key = (name, _labels(labels))
            old = merged.get(key)
            if old is None:
                merged[key] = (value, at)
            elif metric.kind == "counter":
                merged[key] = (old[0] + value, max(old[1], at))
            elif at > old[1]:
                merged[key] = (value, at)
    out: list[str] = []
    for name, metric in METRICS.items():
        header(out, name, metric.kind, metric.help)
        for (series_name, labels), (value, _at) in sorted(merged.items()):
            if series_name == name:
                out.append(sample(name, dict(labels), value))
    return "\n".join(out) + "\n"


class _Handler(BaseHTTPRequestHandler):
    directory: Path

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?", 1)[0] != "/metrics":
            self.send_error(404, "try /metrics")
            return
        body = render(self.directory).encode()
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("metrics: " + format, *args)


def serve(port: int, host: str = "") -> ThreadingHTTPServer:
    """Serve `metrics_dir(port)` on `host:port` from a daemon thread (OSError when the port
    is taken); `shutdown()` the server to stop."""
    handler = type("MetricsHandler", (_Handler,), {"directory": metrics_dir(port)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="onceflow-metrics", daemon=True).start()
    return server


_served: dict[int, ThreadingHTTPServer] = {}


def _ensure_served(port: int) -> None:
    if port in _served:
        return
    try:
        _served[port] = serve(port)
        log.info("Spark connector metrics on port %d (GET /metrics)", port)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            log.warning("could not serve Spark connector metrics on port %d: %s", port, exc)


def main(argv: list[str] | None = None) -> None:
    """`python -m onceflow.spark.metrics --port N`: serve the figures until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="")
    args = parser.parse_args(argv)
    server = serve(args.port, args.host)
    print(f"serving {metrics_dir(args.port)} on port {args.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
