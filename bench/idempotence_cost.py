"""Cost of idempotence: confluent-kafka acks=all with and without `enable.idempotence`.

Starts one `onceflow broker` child process (default configuration: acks=all appends are
fsynced by group commit) on a temporary data directory. Then, for `--rounds` rounds, produces
`--bytes` of 1 KiB records to a fresh 3-partition topic in each of three modes, rotating which
goes first, so drift on a shared machine (page cache, other processes) hits every mode alike:

- `plain`: `enable.idempotence=false`, librdkafka's defaults (up to 1 000 000 requests in
  flight per connection);
- `plain_inflight5`: `enable.idempotence=false` with `max.in.flight.requests.per.connection=5`,
  the cap librdkafka applies to idempotent producers;
- `idempotent`: `enable.idempotence=true` (5 in flight, producer id and sequences checked by
  the broker).

Each run measures wall time (MB/s acknowledged) and the broker's CPU time (user + system, from
/proc/<pid>/stat, 10 ms resolution) per MB; topics are deleted between runs.

The broker-side cost of idempotence is the per-batch producer-state check and bookkeeping, so
the headline figure is broker CPU per MB (median over rounds), `idempotent` vs
`plain_inflight5`: the same request pattern, differing only in idempotence; the target is <= 5%
extra. Against `plain` the difference also holds the client's pipelining cap (fewer requests
per fsync round), and throughput mostly measures the client; both are reported.

On a shared 2-core machine the end-to-end figures move by +-10% between runs, more than the
effect measured. So the script also times the broker's append path alone, in-process and
without fsync: `PartitionLog.append` of the same 256 KiB batches (1 KiB records) with and
without a producer id, interleaved, median of `--micro-repeats`. The extra microseconds per
batch, times batches per MB, over the broker CPU per MB measured end to end, is the estimated
broker cost (`append_path` in the results).

Appends the run to bench/results/idempotence_cost.json and prints one line.

    .venv/bin/python bench/idempotence_cost.py                     # 6 rounds x 256 MiB
    .venv/bin/python bench/idempotence_cost.py --rounds 4 --bytes 64MiB
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from broker_throughput import append_result, machine, parse_size, ratio
from confluent_kafka import Producer

from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.log.config import LogConfig
from onceflow.log.partition import PartitionLog
from onceflow.records.builder import BatchBuilder

RESULTS = Path(__file__).parent / "results" / "idempotence_cost.json"
TARGET_BROKER_COST = 0.05  # idempotence may cost the broker at most 5% more CPU per MB
MODES = ("plain", "plain_inflight5", "idempotent")
MODE_CONFIG = {
    "plain": {"enable.idempotence": False},
    "plain_inflight5": {"enable.idempotence": False, "max.in.flight.requests.per.connection": 5},
    "idempotent": {"enable.idempotence": True},
}
_TICKS = os.sysconf("SC_CLK_TCK")


def broker_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process `pid` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14, 15)


def produce_run(
    bootstrap: str, topic: str, settings: Mapping[str, object], args, pid: int
) -> dict[str, float]:
    """Produce `args.bytes` to `topic` with confluent-kafka (acks=all plus `settings`, e.g.
    idempotence or security); wall time, MB/s and broker CPU seconds per MB."""
    value = getattr(args, "value", None) or os.urandom(args.record_size)
    failed = 0

    def on_delivery(err, _msg) -> None:
        nonlocal failed
        if err is not None:
            failed += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            **settings,
            "linger.ms": args.linger_ms,
            "batch.size": args.batch_size,
            "queue.buffering.max.kbytes": 512 * 1024,
            "compression.type": "none",
        }
    )
    producer.list_topics(topic, timeout=10)  # connect and init the producer id before timing
    target = args.bytes // args.record_size
    partitions = args.partitions
    sent = 0
    cpu_before = broker_cpu_seconds(pid)
    start = time.monotonic()
    while sent < target:
        try:
            producer.produce(topic, value, partition=sent % partitions, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        if sent % 1000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    seconds = time.monotonic() - start
    cpu = broker_cpu_seconds(pid) - cpu_before
    if failed or remaining:
        raise RuntimeError(f"{topic}: {failed} records failed, {remaining} not delivered")
    mb = sent * args.record_size / 1e6
    return {
        "records": sent,
        "seconds": seconds,
        "mb_per_s": mb / seconds,
        "broker_cpu_s": cpu,
        "broker_cpu_ms_per_mb": cpu * 1000 / mb,
    }


def run_rounds(args, modes, client_mode, topic_config, prefix: str) -> dict[str, list[dict]]:
    """`args.rounds` rounds of `produce_run`, one fresh topic per mode (created with
    `topic_config(mode)`, produced to with `client_mode(mode)`'s producer settings, then
    deleted), rotating which mode goes first each round; one embedded broker for all."""
    data_dir = Path(tempfile.mkdtemp(prefix=prefix))
    broker = EmbeddedBroker(data_dir, 30)
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    width = max(len(mode) for mode in modes)
    try:
        with AdminClient({"bootstrap.servers": broker.address}) as admin:
            for round_index in range(args.rounds):
                shift = round_index % len(modes)
                for mode in modes[shift:] + modes[:shift]:
                    topic = f"{mode}-{round_index}"
                    new = NewTopic(topic, args.partitions, 1, topic_config(mode))
                    admin.create_topics([new])[topic].raise_for_error()
                    settings = MODE_CONFIG[client_mode(mode)]
                    result = produce_run(broker.address, topic, settings, args, broker.proc.pid)
                    runs[mode].append(result)
                    print(
                        f"round {round_index} {mode:>{width}}: {result['mb_per_s']:6.1f} MB/s, "
                        f"broker {result['broker_cpu_ms_per_mb']:.2f} ms CPU/MB",
                        flush=True,
                    )
                    admin.delete_topics([topic])[topic].raise_for_error()
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return runs


MICRO_BATCH_RECORDS = 256
MICRO_BATCHES = 400


def _micro_batches(producer_id: int, record_size: int) -> list[bytearray]:
    value = os.urandom(record_size)
    batches = []
    for i in range(MICRO_BATCHES):
        idempotent = producer_id >= 0
        builder = BatchBuilder(
            producer_id=producer_id,
            producer_epoch=0 if idempotent else -1,
            base_sequence=i * MICRO_BATCH_RECORDS if idempotent else -1,
        )
        for _ in range(MICRO_BATCH_RECORDS):
            builder.append(1_700_000_000_000, None, value)
        batches.append(builder.build())
    return batches


def append_path(args) -> dict[str, float]:
    """Microseconds per `PartitionLog.append` of a 256-record batch, without and with a
    producer id (no fsync, fresh log per pass, passes interleaved)."""
    config = LogConfig.from_properties({})
    timings: dict[str, list[float]] = {"plain": [], "idempotent": []}
    batches = {
        "plain": _micro_batches(-1, args.record_size),
        "idempotent": _micro_batches(7, args.record_size),
    }
    for repeat in range(args.micro_repeats):
        for mode in ("plain", "idempotent") if repeat % 2 == 0 else ("idempotent", "plain"):
            directory = tempfile.mkdtemp(prefix="onceflow-idem-micro-")
            log = PartitionLog(directory, "micro", 0, config)
            try:
                start = time.perf_counter()
                for batch in batches[mode]:
                    if log.append(batch).error:
                        raise RuntimeError(f"{mode}: append failed")
                timings[mode].append((time.perf_counter() - start) / MICRO_BATCHES * 1e6)
            finally:
                log.close()
                shutil.rmtree(directory, ignore_errors=True)
    plain = statistics.median(timings["plain"])
    idempotent = statistics.median(timings["idempotent"])
    batch_mb = MICRO_BATCH_RECORDS * args.record_size / 1e6
    return {
        "batch_records": MICRO_BATCH_RECORDS,
        "us_per_batch_plain": plain,
        "us_per_batch_idempotent": idempotent,
        "extra_us_per_batch": idempotent - plain,
        "extra_ms_cpu_per_mb": (idempotent - plain) / 1000 / batch_mb,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--bytes", type=parse_size, default=256 << 20, help="per run")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--micro-repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    micro = append_path(args)
    print(
        f"append path: {micro['us_per_batch_plain']:.0f} us plain, "
        f"{micro['us_per_batch_idempotent']:.0f} us idempotent per "
        f"{MICRO_BATCH_RECORDS}-record batch",
        flush=True,
    )
    runs = run_rounds(args, MODES, lambda mode: mode, lambda mode: {}, "onceflow-idem-bench-")

    median = {
        mode: {
            key: statistics.median(r[key] for r in runs[mode])
            for key in ("mb_per_s", "broker_cpu_ms_per_mb")
        }
        for mode in MODES
    }

    def cost(mode: str, base: str, key: str) -> float:
        return ratio(median[mode][key], median[base][key]) - 1

    cpu_cost = cost("idempotent", "plain_inflight5", "broker_cpu_ms_per_mb")
    cpu_cost_vs_plain = cost("idempotent", "plain", "broker_cpu_ms_per_mb")
    throughput_cost = -cost("idempotent", "plain_inflight5", "mb_per_s")
    throughput_cost_vs_plain = -cost("idempotent", "plain", "mb_per_s")
    cpu = {mode: median[mode]["broker_cpu_ms_per_mb"] for mode in MODES}
    mbps = {mode: median[mode]["mb_per_s"] for mode in MODES}
    micro["estimated_broker_cost"] = ratio(micro["extra_ms_cpu_per_mb"], cpu["plain_inflight5"])
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    summary = (
        f"{now} idempotence cost to the broker: CPU/MB {cpu_cost:+.1%} vs plain with 5 in "
        f"flight (target <= {TARGET_BROKER_COST:.0%}), {cpu_cost_vs_plain:+.1%} vs plain; "
        f"append path {micro['extra_us_per_batch']:+.0f} us per {MICRO_BATCH_RECORDS}-record "
        f"batch = {micro['estimated_broker_cost']:+.1%} of the broker's CPU/MB; "
        f"ms CPU/MB plain {cpu['plain']:.2f}, plain_inflight5 {cpu['plain_inflight5']:.2f}, "
        f"idempotent {cpu['idempotent']:.2f}; MB/s plain {mbps['plain']:.1f}, plain_inflight5 "
        f"{mbps['plain_inflight5']:.1f}, idempotent {mbps['idempotent']:.1f}; "
        f"{args.rounds} rounds x {args.bytes >> 20} MiB, 1 KiB records, "
        f"{args.partitions} partitions, acks=all, fsync on"
    )
    run = {
        "date": now,
        "machine": machine(),
        "config": {
            "rounds": args.rounds,
            "bytes_per_run": args.bytes,
            "record_size": args.record_size,
            "partitions": args.partitions,
            "acks": "all",
            "compression": "none",
            "linger_ms": args.linger_ms,
            "batch_size": args.batch_size,
            "broker": "default config (fsync on acks=all via group commit), subprocess",
            "client": "confluent-kafka " + __import__("confluent_kafka").version()[0],
            "modes": MODE_CONFIG,
            "order": "rotating: round r starts with mode r mod 3",
        },
        "runs": runs,
        "median": median,
        "broker_cpu_cost": cpu_cost,
        "broker_cpu_cost_vs_plain": cpu_cost_vs_plain,
        "throughput_cost": throughput_cost,
        "throughput_cost_vs_plain": throughput_cost_vs_plain,
        "target_broker_cpu_cost": TARGET_BROKER_COST,
        "append_path": micro,
        "target_met": cpu_cost <= TARGET_BROKER_COST
        and micro["estimated_broker_cost"] <= TARGET_BROKER_COST,
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
