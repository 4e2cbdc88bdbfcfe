"""Console page render times on a large cluster: 1 000 topics x 10 partitions and 10 000
transactional ids (every tenth with an open transaction) on an embedded onceflow broker.

The ids are made with raw InitProducerId requests (and AddPartitionsToTxn v3 for the open
ones, with the maximum transaction timeout so none is aborted during the run); the console
(`onceflow.console.app`) is served by uvicorn in a thread and each page and JSON API is
fetched over HTTP: once cold, then `--rounds` times, keeping the median. Appends the run to
bench/results/console_scale.json and prints one line per page. A benchmark, not a test:
bench/README.md records the figures.

    .venv/bin/python bench/console_scale.py
    .venv/bin/python bench/console_scale.py --topics 100 --txn-ids 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import uvicorn
from broker_throughput import append_result, machine

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.connection import BrokerConnection
from onceflow.client.errors import KafkaConnectionError
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest

RESULTS = Path(__file__).parent / "results" / "console_scale.json"
MAX_TXN_TIMEOUT_MS = 900_000  # the broker's transaction.max.timeout.ms default
PAGES = ("/api/overview", "/", "/?partial=1", "/api/transactions", "/transactions",
         "/transactions?page=50", "/transactions?state=Ongoing&prefix=txn-05&page=2&limit=20",
         "/api/groups", "/groups", "/api/spark", "/spark", "/api/topics/topic-0000",
         "/topics/topic-0000")  # fmt: skip


def create_topics(bootstrap: str, topics: int, partitions: int) -> float:
    """Create topic-0000... in CreateTopics requests of 50 (a chunk whose connection broke is
    sent again; topics it already made count as made); seconds taken."""
    start = time.perf_counter()
    names = [f"topic-{i:04d}" for i in range(topics)]
    with AdminClient({"bootstrap.servers": bootstrap, "request.timeout.ms": 300_000}) as admin:
        for chunk in range(0, topics, 50):
            wanted = [NewTopic(name, partitions, 1) for name in names[chunk : chunk + 50]]
            for attempt in range(3):
                try:
                    results = admin.create_topics(wanted)
                    break
                except KafkaConnectionError:
                    if attempt == 2:
                        raise
            for name, result in results.items():
                if not result.ok and result.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise SystemExit(f"cannot create {name}: {result.error_code.name}")
    return time.perf_counter() - start


def create_transactional_ids(bootstrap: str, count: int, open_every: int, topics: int) -> float:
    """InitProducerId for txn-00000...; every `open_every`-th id also adds partition 0 of one
    of the `topics` topics (an open transaction). Seconds taken."""
    start = time.perf_counter()
    topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    with BrokerConnection.from_address(bootstrap, request_timeout_ms=120_000).connect() as conn:
        for i in range(count):
            tid = f"txn-{i:05d}"
            init = InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=MAX_TXN_TIMEOUT_MS,
                producer_id=-1, producer_epoch=-1,
            )  # fmt: skip
            response = conn.send(init, 4)
            if response.error_code:
                raise SystemExit(f"InitProducerId {tid}: error {response.error_code}")
            if i % open_every == 0:
                add = AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=response.producer_id,
                    v3_and_below_producer_epoch=response.producer_epoch,
                    v3_and_below_topics=[topic_cls(name=f"topic-{i % topics:04d}", partitions=[0])],
                )
                for result in conn.send(add, 3).results_by_topic_v3_and_below:
                    for p in result.results_by_partition:
                        if p.partition_error_code:
                            raise SystemExit(f"AddPartitionsToTxn {tid}: {p.partition_error_code}")
    return time.perf_counter() - start


def serve_console(bootstrap: str, port: int) -> uvicorn.Server:
    """The console for `bootstrap` on 127.0.0.1:`port`, in a daemon thread."""
    from onceflow.console.app import create_app

    server = uvicorn.Server(
        uvicorn.Config(
            create_app({"bootstrap.servers": bootstrap}),
            host="127.0.0.1",
            port=port,
            log_level="warning",
        )  # fmt: skip
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server


def fetch(url: str) -> tuple[float, int]:
    """(seconds, bytes) of one GET."""
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as response:
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"{url}: HTTP {response.status}")
    return time.perf_counter() - start, len(body)


def time_pages(base: str, rounds: int) -> dict[str, dict[str, float]]:
    """Per page: the cold (first) time, the median and every round, in ms, and the size."""
    out = {}
    for page in PAGES:
        cold, size = fetch(base + page)
        times = [fetch(base + page)[0] for _ in range(rounds)]
        out[page] = {
            "cold_ms": round(cold * 1000, 1),
            "median_ms": round(statistics.median(times) * 1000, 1),
            "rounds_ms": [round(t * 1000, 1) for t in times],
            "bytes": size,
        }
        print(f"  {page:<24} cold {cold * 1000:8.0f} ms  median {out[page]['median_ms']:8.0f} ms"
              f"  {size:>10,} bytes", flush=True)  # fmt: skip
    return out


def open_descriptors(pid: int) -> int:
    """How many descriptors process `pid` holds (Linux /proc), -1 where unknown."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--txn-ids", type=int, default=10_000)
    parser.add_argument("--open-every", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=0, help="console port (0: a free one)")
    parser.add_argument("--note", default="", help="recorded with the run (e.g. the commit)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    # the broker holds one descriptor per segment (its .log; the indexes are opened only to be
    # written, log.index): 1 000 x 10 partitions need ~10 000, above a common soft limit of
    # 1 024, so let the child inherit the hard limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="onceflow-console-bench-") as tmp:
        broker = EmbeddedBroker(Path(tmp), 120)
        try:
            setup = {
                "create_topics_s": create_topics(broker.address, args.topics, args.partitions),
                "create_txn_ids_s": create_transactional_ids(
                    broker.address, args.txn_ids, args.open_every, args.topics
                ),
            }
            setup["broker_open_fds"] = open_descriptors(broker.proc.pid)
            print(f"setup: {setup}", flush=True)
            server = serve_console(broker.address, args.port)
            port = server.servers[0].sockets[0].getsockname()[1]
            print(f"console_scale: {args.topics} topics x {args.partitions} partitions, "
                  f"{args.txn_ids} transactional ids", flush=True)  # fmt: skip
            pages = time_pages(f"http://127.0.0.1:{port}", args.rounds)
            server.should_exit = True
        except BaseException:
            print(broker.stderr_path.read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            broker.stop()
    run = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "note": args.note,
        "config": {
            "nofile_limit": hard,
            "topics": args.topics,
            "partitions": args.partitions,
            "txn_ids": args.txn_ids,
            "open_every": args.open_every,
            "rounds": args.rounds,
        },  # fmt: skip
        "setup": {k: round(v, 1) for k, v in setup.items()},
        "load_average": os.getloadavg(),
        "pages": pages,
        "summary": ", ".join(f"{p} {v['median_ms']:.0f} ms" for p, v in pages.items()),
    }
    append_result(args.out, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
