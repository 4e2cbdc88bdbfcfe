"""Benchmark the generated protocol codec on the broker's hot paths.

- decode a ProduceRequest v9 carrying 1 MiB of records across 3 partitions;
- encode a FetchResponse v12 of similar size (joined bytes, and as zero-copy parts);
- the same with small requests (one 1 KiB batch) to show the fixed per-request cost.

Prints ops/s and MB/s and writes them to bench/results/protocol_codec.txt.
Usage: python bench/protocol_codec.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

from onceflow.protocol.messages.fetch import FetchResponse
from onceflow.protocol.messages.produce import ProduceRequest

RESULTS = Path(__file__).resolve().parent / "results" / "protocol_codec.txt"
MIB = 1 << 20


def produce_request(total: int, partitions: int) -> bytes:
    topic = ProduceRequest.TopicProduceData
    share = total // partitions
    data = [
        topic.PartitionProduceData(index=i, records=os.urandom(share)) for i in range(partitions)
    ]
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[topic(name="bench-topic", partition_data=data)],
    )
    return request.encode(9)


def fetch_response(total: int, partitions: int) -> FetchResponse:
    topic = FetchResponse.FetchableTopicResponse
    share = total // partitions
    data = [
        topic.PartitionData(
            partition_index=i,
            high_watermark=1000,
            last_stable_offset=1000,
            log_start_offset=0,
            aborted_transactions=[],
            records=memoryview(os.urandom(share)),
        )
        for i in range(partitions)
    ]
    return FetchResponse(session_id=0, responses=[topic(topic="bench-topic", partitions=data)])


def measure(
    fn: Callable[[], object], seconds: float, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Operations per second of `fn`, measured over about `seconds` of `clock` (wall time by
    default; `time.process_time` for CPU time)."""
    fn()
    count, batch = 0, 1
    start = clock()
    while True:
        for _ in range(batch):
            fn()
        count += batch
        elapsed = clock() - start
        if elapsed >= seconds:
            return count / elapsed
        batch = min(batch * 2, 10_000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per case")
    args = parser.parse_args(argv)

    big_produce = produce_request(MIB, 3)
    small_produce = produce_request(1024, 1)
    big_fetch = fetch_response(MIB, 3)
    small_fetch = fetch_response(1024, 1)
    cases = [
        (
            "decode ProduceRequest v9, 3 x 341 KiB",
            len(big_produce),
            lambda: ProduceRequest.decode(big_produce, 9),
        ),
        (
            "decode ProduceRequest v9, 1 x 1 KiB",
            len(small_produce),
            lambda: ProduceRequest.decode(small_produce, 9),
        ),
        (
            "encode FetchResponse v12, 3 x 341 KiB (bytes)",
            len(big_fetch.encode(12)),
            lambda: big_fetch.encode(12),
        ),
        (
            "encode FetchResponse v12, 3 x 341 KiB (parts)",
            len(big_fetch.encode(12)),
            lambda: big_fetch.encode_parts(12),
        ),
        (
            "encode FetchResponse v12, 1 x 1 KiB (bytes)",
            len(small_fetch.encode(12)),
            lambda: small_fetch.encode(12),
        ),
    ]
    lines = [
        f"# protocol codec benchmark, {time.strftime('%Y-%m-%d %H:%M:%S')}, "
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cpus",
        f"{'case':50} {'ops/s':>12} {'MB/s':>12}",
    ]
    for name, size, fn in cases:
        ops = measure(fn, args.seconds)
        lines.append(f"{name:50} {ops:12.0f} {ops * size / 1e6:12.1f}")
        print(lines[-1], flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print(f"written to {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
