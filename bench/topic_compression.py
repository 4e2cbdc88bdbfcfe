"""Cost of a topic's `compression.type`: the broker recompressing what producers send.

Starts one `onceflow broker` child process on a temporary data directory and, for `--rounds`
rounds, produces `--bytes` of 1 KiB records with confluent-kafka (acks=all, idempotent, no
producer compression; values are text-like, so they compress) to a fresh 3-partition topic
per mode, rotating which mode goes first:

- `producer`: the default; batches are stored as sent (no record is decoded);
- `lz4`, `zstd`, `gzip`: the topic's codec, so the broker decodes every batch and builds a
  compressed one (Kafka's LogValidator does the same for this setting).

Reports MB/s acknowledged and broker CPU ms per MB (median over rounds) and each codec's ratio
to `producer`. Appends to bench/results/topic_compression.json and prints one line.

    .venv/bin/python bench/topic_compression.py                     # 3 rounds x 64 MiB
"""

from __future__ import annotations

import argparse
import datetime
import statistics
from pathlib import Path

from broker_throughput import append_result, machine, parse_size, ratio
from idempotence_cost import run_rounds

RESULTS = Path(__file__).parent / "results" / "topic_compression.json"
MODES = ("producer", "lz4", "zstd", "gzip")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bytes", type=parse_size, default=64 << 20, help="per run")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.value = (b"order id=%08d status=validated amount=42.00 currency=EUR; " * 20)[
        : args.record_size
    ]

    runs = run_rounds(
        args,
        MODES,
        lambda mode: "idempotent",
        lambda mode: {"compression.type": mode},
        "onceflow-compression-bench-",
    )

    median = {
        mode: {k: statistics.median(r[k] for r in runs[mode]) for k in runs[mode][0]}
        for mode in MODES
    }
    base = median["producer"]
    ratios = {
        mode: {
            "mb_per_s": ratio(median[mode]["mb_per_s"], base["mb_per_s"]),
            "broker_cpu_ms_per_mb": ratio(
                median[mode]["broker_cpu_ms_per_mb"], base["broker_cpu_ms_per_mb"]
            ),
        }
        for mode in MODES[1:]
    }
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    summary = f"{now} topic compression.type vs producer (stored as sent): " + "; ".join(
        f"{mode} {ratios[mode]['mb_per_s']:.2f}x MB/s, "
        f"{ratios[mode]['broker_cpu_ms_per_mb']:.1f}x broker CPU/MB"
        for mode in MODES[1:]
    )
    summary += f"; producer {base['mb_per_s']:.0f} MB/s, {base['broker_cpu_ms_per_mb']:.2f} ms/MB"
    record = {
        "date": now,
        "machine": machine(),
        "config": {k: v for k, v in vars(args).items() if k not in ("out", "value")},
        "median": median,
        "ratios_to_producer": ratios,
        "summary": summary,
    }
    append_result(args.out, record)
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
