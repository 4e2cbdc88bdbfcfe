"""The log cleaner: bounded internal topics, start time, and the cleaner's cost on produce.

Builds a data directory holding what a busy broker leaves in its internal topics (one
partition each, 1 MiB segments so the cleaner reaches old data): `--commits` offset commits
over `--keys` group/partition keys in `__consumer_offsets` (1 000 records per batch, as a
commit of many partitions writes them), and `--transactions` transactions over `--keys`
transactional ids in `__transaction_state` (ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT records
each). The records are the coordinators' own encodings, appended through `PartitionLog`, so the
directory is what the broker would have written. Then:

- `before`: a broker (`onceflow broker` child process, clean shutdown) starts on it: seconds
  from spawn to ready (the coordinators load both topics first) and disk bytes;
- the cleaner runs in-process until no log needs cleaning (`LogCleanerManager.clean_log`):
  seconds, bytes read and written, records removed;
- `after`: the broker starts on the cleaned directory: seconds to ready, disk bytes;
- `live_only`: a directory holding only the live keys (one commit per key, one COMPLETE_COMMIT
  per id): seconds to ready. The aim is `after` within 2x of it;
- produce cost: 1 KiB acks=all confluent-kafka produce of `--bytes` to a 3-partition topic on a
  broker started on a copy of the uncleaned directory with an eager cleaner
  (`log.cleaner.backoff.ms=100`) against the same with `log.cleaner.enable=false`, rounds
  alternating, and the same with `log.cleaner.io.max.bytes.per.second=--throttle` (Kafka's
  cleaner throttle; unthrottled is Kafka's default). The cleaner starts with the broker, so it
  works while the produce runs (the result says how long cleaning takes alone, to compare with
  the produce window). The aim is <= 10% lower MB/s. In one Python process the cleaner thread
  competes with the event loop for the interpreter lock; the throttle bounds that. Each
  cleaner round also reads the broker's `onceflow_log_cleaner_bytes_read_total` right after
  its produce ends: below the bytes a whole cleaning reads means the cleaner was still at work
  when the produce ended (it starts when the broker is ready, before the produce), so the
  window measured cleaner-on throughput only. `--produce-cost-only` skips the start-time
  measures; `--modes` picks the produce modes. The cleaner writes in a niced child process
  (`onceflow.log.cleaner.process`, the default); mode `cleaner_thread` is the eager cleaner
  writing in a broker thread instead, as before that key existed, so one run compares both;
  `cleaner_nice19` the child at `onceflow.log.cleaner.process.nice=19` (default 10);
  `burner_nice10` no cleaner but a niced CPU-burning process (a control).
- paired slices (`--paired`): the whole-run comparison above swings by 3x between rounds of
  one mode on this shared machine, more than the effect. So one broker produces without pause
  while the cleaner's child is stopped (SIGSTOP) and resumed (SIGCONT) in alternate
  `--slice`-second slices; the cost is 1 - the median of run/stop throughput over adjacent
  slice pairs in which the child existed throughout. `burnN,...` targets toggle CPU burner
  processes instead (cleaner off): the control that shows the method sees a cost. Round
  boundaries (the child's start, the broker's prepare and swap) fall outside the pairs.

Appends the run to bench/results/log_cleaner.json and prints one line.

    .venv/bin/python bench/log_cleaner.py                        # 1M commits, 100k txns
    .venv/bin/python bench/log_cleaner.py --commits 100000 --transactions 10000
    .venv/bin/python bench/log_cleaner.py --produce-cost-only --commits 3000000 \
        --transactions 300000 --modes --paired child child_nice10 child burn10 --slice 0.5
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from broker_throughput import append_result, machine, parse_size, ratio
from confluent_kafka import Producer
from security_throughput import free_port

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.common import TopicPartition
from onceflow.coordinator.group.offsets import CommittedOffset
from onceflow.coordinator.group.records import OffsetsBatchWriter
from onceflow.coordinator.txn.log_codec import encode_key, encode_value
from onceflow.coordinator.txn.metadata import TxnTransitMetadata
from onceflow.coordinator.txn.state import TxnState
from onceflow.log.manager import LogManager
from onceflow.records.builder import BatchBuilder

RESULTS = Path(__file__).parent / "results" / "log_cleaner.json"
SEGMENT_BYTES = 1 << 20
BROKER = {
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
    "offsets.topic.segment.bytes": SEGMENT_BYTES,
    "transaction.state.log.segment.bytes": SEGMENT_BYTES,
}
INTERNAL = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)}
PER_BATCH = 1000
TXN_STEPS = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)


def _offsets_batches(commits: int, keys: int, now: int):
    """Batches of offset records: commit i sets key i % keys to offset i."""
    groups = max(1, keys // 100)
    for start in range(0, commits, PER_BATCH):
        writer = OffsetsBatchWriter(now)
        for i in range(start, min(commits, start + PER_BATCH)):
            key = i % keys
            tp = TopicPartition("events", key // groups)
            writer.add_offset(f"group-{key % groups}", tp, CommittedOffset(i, commit_timestamp=now))
        yield writer.build()


def _txn_batches(transactions: int, keys: int, now: int, steps=TXN_STEPS):
    """Batches of state records: transaction i of id i % keys, one record per state."""
    builder = BatchBuilder()
    for i in range(transactions):
        tid = i % keys
        epoch = (i // keys) % 30000
        for state in steps:
            partitions = (
                frozenset()
                if state == TxnState.COMPLETE_COMMIT
                else frozenset({TopicPartition("events", tid % 8)})
            )
            transit = TxnTransitMetadata(
                producer_id=1000 + tid,
                previous_producer_id=-1,
                next_producer_id=-1,
                producer_epoch=epoch,
                last_producer_epoch=-1,
                txn_timeout_ms=60_000,
                txn_state=state,
                topic_partitions=partitions,
                txn_start_timestamp=now,
                txn_last_update_timestamp=now,
            )
            builder.append(now, encode_key(f"txn-{tid}"), encode_value(transit))
        if len(builder) >= PER_BATCH:
            yield builder.build()
            builder = BatchBuilder()
    if len(builder):
        yield builder.build()


def build_data_dir(path: Path, commits: int, transactions: int, keys: int) -> None:
    """A data directory as the broker would leave it after that history."""
    manager = LogManager(str(path), BROKER)
    manager.start()
    now = int(time.time() * 1000)
    for topic, batches in (
        ("__consumer_offsets", _offsets_batches(commits, keys, now)),
        ("__transaction_state", _txn_batches(transactions, keys, now)),
    ):
        manager.create_topic(topic, 1, INTERNAL)
        log = manager.get_log(topic, 0)
        for batch in batches:
            log.append(batch, now_ms=now)
        log.flush()
    manager.close()


def clean_all(path: Path) -> dict[str, float]:
    """Run the cleaner in-process until no log needs it; what it did."""
    manager = LogManager(str(path), BROKER)
    manager.start()
    start = time.monotonic()
    rounds = 0
    for log in manager.cleaner.compacted_logs():
        while manager.cleaner.clean_log(log) is not None:
            rounds += 1
    seconds = time.monotonic() - start
    totals = manager.cleaner.totals
    manager.close()
    return {
        "seconds": round(seconds, 2),
        "mb_per_s": round(totals.bytes_read / 1e6 / seconds, 1) if seconds else None,
        "rounds": rounds,
        "bytes_read": totals.bytes_read,
        "bytes_written": totals.bytes_written,
        "records_removed": totals.records_removed,
    }


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def start_seconds(workdir: Path, settings=None) -> float:
    """Seconds from spawning a broker on `workdir`/data to its ready line (then stopped)."""
    start = time.monotonic()
    broker = EmbeddedBroker(workdir, 600, settings={**BROKER, **(settings or {})})
    seconds = time.monotonic() - start
    broker.stop()
    return round(seconds, 3)


def cleaner_bytes_read(metrics_address: str) -> int:
    """The broker's `onceflow_log_cleaner_bytes_read_total` (its finished rounds)."""
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=30) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("onceflow_log_cleaner_bytes_read_total "):
                return int(float(line.split()[1]))
    raise RuntimeError("no onceflow_log_cleaner_bytes_read_total in /metrics")


BURNER = """
import sys, zlib
from pathlib import Path
files = [f for f in Path(sys.argv[1]).rglob("*.log")]
while True:
    for f in files:
        data = f.read_bytes()
        for i in range(0, len(data), 1024):
            zlib.crc32(data[i : i + 1024])
"""


def produce_mb_per_s(
    workdir: Path, settings: dict, nbytes: int, burner_nice: int | None = None
) -> tuple[float, int]:
    """1 KiB acks=all produce of `nbytes` to a fresh 3-partition topic: MB/s, and the bytes the
    cleaner had read (finished rounds) when the produce ended. With `burner_nice`, a process
    at that niceness reads the data directory's segments and checksums them in Python (one
    core of CPU work that is not the cleaner) while the produce runs: the control that tells
    the cost of any niced CPU work on this machine from the cost of the cleaner itself."""
    os.sync()  # the copied directory's dirty pages must not be written back during the produce
    metrics = f"127.0.0.1:{free_port()}"
    broker = EmbeddedBroker(
        workdir, 600, settings={**BROKER, "onceflow.metrics.listener": metrics, **settings}
    )
    burner = None
    try:
        bootstrap = broker.address
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic("load", 3, 1)])
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20}
        )
        producer.list_topics("load", timeout=10)
        if burner_nice is not None:
            burner = subprocess.Popen(
                ["nice", "-n", str(burner_nice), sys.executable, "-c", BURNER, str(workdir)]
            )
            time.sleep(0.5)
        value = b"x" * 1024
        count = nbytes // 1024
        start = time.monotonic()
        for i in range(count):
            while True:
                try:
                    producer.produce("load", value, partition=i % 3)
                    break
                except BufferError:
                    producer.poll(0.01)
        assert producer.flush(120) == 0
        rate = count * 1024 / 1e6 / (time.monotonic() - start)
        return rate, cleaner_bytes_read(metrics)
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
        broker.stop()


def cleaner_children(broker_pid: int) -> list[int]:
    """Pids of the broker's cleaner child processes (`onceflow.log.cleaner.child`)."""
    pids = []
    for task in Path(f"/proc/{broker_pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in map(int, children):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"onceflow.log.cleaner.child" in cmdline:
                pids.append(pid)
    return pids


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def paired_slices(
    workdir: Path, settings: dict, slice_s: float, limit_s: float, burners: tuple[int, ...] = ()
) -> list[dict]:
    """Produce without pause while the cleaner's child is stopped (SIGSTOP) and resumed
    (SIGCONT) in alternate slices of `slice_s` seconds, until the cleaner has nothing left to do
    or `limit_s`: per slice, whether the cleaner ran, whether a child existed the whole slice,
    and the MB/s acknowledged. One broker, one data directory, adjacent slices: the only
    difference between a "run" and a "stop" slice is the cleaner's work, and the machine's
    drifting load is shared by both of a pair. With `burners` (niceness values), the same is
    done to that many CPU burner processes instead of the cleaner (the broker's cleaner
    disabled by `settings`) for `limit_s`: the control that shows the method sees a cost."""
    os.sync()
    metrics = f"127.0.0.1:{free_port()}"
    broker = EmbeddedBroker(
        workdir, 600, settings={**BROKER, "onceflow.metrics.listener": metrics, **settings}
    )
    slices: list[dict] = []
    acked = [0]
    done = threading.Event()
    burning = [
        subprocess.Popen(["nice", "-n", str(n), sys.executable, "-c", BURNER, str(workdir)])
        for n in burners
    ]

    def targets() -> list[int]:
        return [b.pid for b in burning] if burning else cleaner_children(broker.proc.pid)

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[0] += len(msg.value())

    def toggle() -> None:
        try:
            _toggle()
        finally:  # whatever happened: resume the targets and end the produce loop
            _signal_all(targets(), signal.SIGCONT)
            done.set()

    def _toggle() -> None:
        running, seen = True, False
        deadline = time.monotonic() + limit_s
        while not done.is_set() and time.monotonic() < deadline:
            start_bytes, start = acked[0], time.monotonic()
            present = True
            while time.monotonic() - start < slice_s:
                pids = targets()
                present = present and bool(pids)
                _signal_all(pids, signal.SIGCONT if running else signal.SIGSTOP)
                time.sleep(0.02)
            seconds = time.monotonic() - start
            rate = (acked[0] - start_bytes) / 1e6 / seconds
            slices.append(
                {"cleaner": "run" if running else "stop", "child": present, "mb_per_s": rate}
            )
            seen = seen or present
            if seen and not present and cleaner_bytes_read(metrics) > 0 and not targets():
                return
            running = not running

    try:
        with AdminClient({"bootstrap.servers": broker.address}) as admin:
            admin.create_topics([NewTopic("load", 3, 1)])
        producer = Producer(
            {
                "bootstrap.servers": broker.address,
                "acks": "all",
                "linger.ms": 5,
                "batch.size": 1 << 20,
            }
        )
        producer.list_topics("load", timeout=10)
        value = b"x" * 1024
        toggler = threading.Thread(target=toggle)
        toggler.start()
        i = 0
        while not done.is_set():
            try:
                producer.produce("load", value, partition=i % 3, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.01)
            if i % 1000 == 0:
                producer.poll(0)
        toggler.join()
        producer.flush(120)
    finally:
        done.set()
        for burner in burning:
            burner.kill()
            burner.wait()
        broker.stop()
    return slices


# the cleaner child's priority per paired target: the default (nice 10 and SCHED_IDLE), and
# the child niced only, as before `onceflow.log.cleaner.process.sched.idle`
PAIRED_CHILD = {
    "child": {},
    "child_nice10": {"onceflow.log.cleaner.process.sched.idle": "false"},
    "child_nice19": {
        "onceflow.log.cleaner.process.sched.idle": "false",
        "onceflow.log.cleaner.process.nice": 19,
    },
}


def paired_cost(slices: list[dict]) -> dict[str, object]:
    """Cost from adjacent run/stop slices that both had a child the whole slice."""
    ratios = [
        a["mb_per_s"] / b["mb_per_s"] if a["cleaner"] == "run" else b["mb_per_s"] / a["mb_per_s"]
        for a, b in zip(slices, slices[1:], strict=False)
        if a["child"]
        and b["child"]
        and a["cleaner"] != b["cleaner"]
        and min(a["mb_per_s"], b["mb_per_s"]) > 0
    ]
    run = [x["mb_per_s"] for x in slices if x["child"] and x["cleaner"] == "run"]
    stop = [x["mb_per_s"] for x in slices if x["child"] and x["cleaner"] == "stop"]
    return {
        "pairs": len(ratios),
        "cost_median_pair": round(1 - statistics.median(ratios), 3) if ratios else None,
        "cost_of_sums": round(1 - sum(run) / sum(stop), 3) if run and stop else None,
        "run_mb_per_s": [round(x, 1) for x in run],
        "stop_mb_per_s": [round(x, 1) for x in stop],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1_000_000)
    parser.add_argument("--transactions", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--bytes", type=parse_size, default=parse_size("64MiB"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--throttle",
        type=int,
        default=2 * 1024 * 1024,
        help="log.cleaner.io.max.bytes.per.second of the throttled mode",
    )
    parser.add_argument(
        "--modes",
        nargs="*",
        choices=(
            "cleaner_off",
            "cleaner_on",
            "cleaner_nice19",
            "cleaner_thread",
            "cleaner_throttled",
            "burner_nice10",
        ),
        default=["cleaner_off", "cleaner_on", "cleaner_throttled"],
    )
    parser.add_argument(
        "--produce-cost-only",
        action="store_true",
        help="skip the broker start-time measures (before, after, live keys only)",
    )
    parser.add_argument(
        "--paired",
        nargs="*",
        default=[],
        metavar="TARGET",
        help="paired-slice runs after the modes (`paired_slices`): `child` (the cleaner child, "
        "default priority: nice 10 and SCHED_IDLE), `child_nice10` / `child_nice19` (niced "
        "only), or `burnN,M` (burner processes at those niceness values, cleaner off), e.g. "
        "--paired child child_nice10 burn10",
    )
    parser.add_argument("--slice", type=float, default=1.0, help="seconds per paired slice")
    parser.add_argument("--paired-limit", type=float, default=60.0, help="seconds per paired run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="onceflow-cleaner-bench-") as tmp:
        root = Path(tmp)
        history = root / "history"
        started = time.monotonic()
        build_data_dir(history / "data", args.commits, args.transactions, args.keys)
        build_seconds = time.monotonic() - started
        pristine = root / "pristine"
        shutil.copytree(history, pristine)
        starts = not args.produce_cost_only
        before = {"disk_bytes": disk_bytes(history)}
        if starts:
            before["start_seconds"] = start_seconds(history)
        cleaning = clean_all(history / "data")
        after = {"disk_bytes": disk_bytes(history)}
        live = root / "live"
        build_data_dir(live / "data", args.keys, args.keys, args.keys)
        live_only = {"disk_bytes": disk_bytes(live)}
        if starts:
            after["start_seconds"] = start_seconds(history)
            live_only["start_seconds"] = start_seconds(live)
        eager = {"log.cleaner.backoff.ms": 100, "log.cleaner.min.cleanable.ratio": "0.01"}
        every_mode = {
            "cleaner_off": {"log.cleaner.enable": "false"},
            "cleaner_on": eager,
            "cleaner_thread": {**eager, "onceflow.log.cleaner.process": "false"},
            "cleaner_nice19": {**eager, "onceflow.log.cleaner.process.nice": 19},
            "cleaner_throttled": {**eager, "log.cleaner.io.max.bytes.per.second": args.throttle},
            "burner_nice10": {"log.cleaner.enable": "false"},
        }
        modes = {mode: every_mode[mode] for mode in args.modes}
        rates: dict[str, list[float]] = {mode: [] for mode in modes}
        read_by_end: dict[str, list[float]] = {mode: [] for mode in modes}
        for round_ in range(args.rounds):
            order = list(modes) if round_ % 2 == 0 else list(reversed(modes))
            for mode in order:
                workdir = root / f"{mode}-{round_}"
                shutil.copytree(pristine, workdir)
                burner = 10 if mode == "burner_nice10" else None
                rate, read = produce_mb_per_s(workdir, modes[mode], args.bytes, burner)
                rates[mode].append(rate)
                read_by_end[mode].append(round(read / max(1, cleaning["bytes_read"]), 2))
                shutil.rmtree(workdir)
        paired = []
        for n, target in enumerate(args.paired):
            workdir = root / f"paired-{n}"
            shutil.copytree(pristine, workdir)
            if target.startswith("burn"):
                nices = tuple(int(x) for x in target[4:].split(","))
                settings = {"log.cleaner.enable": "false"}
            else:
                nices, settings = (), {**eager, **PAIRED_CHILD[target]}
            limit = args.paired_limit
            slices = paired_slices(workdir, settings, args.slice, limit, nices)
            paired.append({"target": target, **paired_cost(slices)})
            print(paired[-1], flush=True)
            shutil.rmtree(workdir)
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    off = medians.get("cleaner_off", float("nan"))
    on = medians.get("cleaner_on", float("nan"))
    throttled = medians.get("cleaner_throttled", float("nan"))
    thread = medians.get("cleaner_thread", float("nan"))
    nice19 = medians.get("cleaner_nice19", float("nan"))
    burned = medians.get("burner_nice10", float("nan"))
    entry = {
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": {
            "commits": args.commits,
            "transactions": args.transactions,
            "keys": args.keys,
            "produce_bytes": args.bytes,
            "rounds": args.rounds,
        },
        "build_seconds": round(build_seconds, 1),
        "before": before,
        "cleaning": cleaning,
        "after": after,
        "live_only": live_only,
        "start_after_vs_live_only": (
            round(ratio(after["start_seconds"], live_only["start_seconds"]), 2) if starts else None
        ),
        "produce_mb_per_s": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
        # the share of a whole cleaning's bytes the cleaner had finished when the produce
        # ended: below 1 means it was still cleaning (cleaner modes only)
        "cleaner_read_by_produce_end": {
            k: vs for k, vs in read_by_end.items() if k != "cleaner_off"
        },
        "produce_cost": round(1 - ratio(on, off), 3),
        "produce_cost_throttled": round(1 - ratio(throttled, off), 3),
        "produce_cost_thread": round(1 - ratio(thread, off), 3),
        "produce_cost_nice19": round(1 - ratio(nice19, off), 3),
        # the control: no cleaner, a niced CPU burner (one core of checksumming) instead
        "produce_cost_burner_nice10": round(1 - ratio(burned, off), 3),
        "throttle_bytes_per_s": args.throttle,
        "paired": paired,
    }
    append_result(args.out, entry)
    print(
        f"start {before.get('start_seconds')}s ({before['disk_bytes'] / 1e6:.1f} MB) -> "
        f"{after.get('start_seconds')}s ({after['disk_bytes'] / 1e6:.1f} MB) after cleaning "
        f"({cleaning['seconds']}s, {cleaning['mb_per_s']} MB/s); live keys only "
        f"{live_only.get('start_seconds')}s (x{entry['start_after_vs_live_only']}); "
        f"produce {off:.1f} -> {on:.1f} MB/s while "
        f"cleaning ({entry['produce_cost']:+.1%} cost), {throttled:.1f} MB/s with "
        f"log.cleaner.io.max.bytes.per.second={args.throttle} "
        f"({entry['produce_cost_throttled']:+.1%}), {thread:.1f} MB/s cleaning in a thread "
        f"({entry['produce_cost_thread']:+.1%}), {nice19:.1f} MB/s with the child at nice 19 "
        f"({entry['produce_cost_nice19']:+.1%}), {burned:.1f} MB/s beside a niced CPU burner "
        f"({entry['produce_cost_burner_nice10']:+.1%})"
    )


if __name__ == "__main__":
    main()
