"""Two source trees side by side: the hot paths of a restructure, before and after.

Runs the same measurements against two checkouts' `src/` (default: /work/main, the branch
point, as "before", and this checkout as "after") in one run, alternating which tree goes
first each round, because these machines are noisy:

- in-process CPU time (so other work on the machine disturbs it less), one child interpreter
  per tree and round (PYTHONPATH selects the tree):
  `PartitionLog.append` of 256-record idempotent batches, `PartitionLog.read` of them back
  (no fsync while appending; one fsync before the reads), and a transaction coordinator
  cycle (AddPartitionsToTxn, EndTxn commit, markers written and COMPLETE_COMMIT durable) on a
  real `LogManager`;
- onceflow's own client (`--measure client`), against a broker started from the same tree
  (its CPU is not counted): the Producer's CPU per 1 KiB record (acks=all, sent and flushed),
  the Consumer's per record read back, and the transactional Producer's per transaction of 10
  records (begin, send, commit);
- the generated protocol codec (`--measure codec`): decoding ProduceRequest v9 and encoding
  FetchResponse v12 (bench/protocol_codec.py's messages, one 1 KiB and three 341 KiB record
  sets), and a MetadataResponse v9 of 100 topics x 8 partitions (many small structs) both
  ways;
- through a broker: `onceflow broker` started from each tree (bench/broker_throughput.py's
  produce and consume with confluent-kafka, acks=all, fsync on).

Medians and best runs per tree and their after/before ratios are appended to
bench/results/source_compare.json and printed (times: lower is better; MB/s: higher).

    .venv/bin/python bench/source_compare.py                            # 3 rounds
    .venv/bin/python bench/source_compare.py --before /work/main --rounds 5 --bytes 64MiB
    .venv/bin/python bench/source_compare.py --measure codec --rounds 10   # the codec alone
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from broker_throughput import (
    add_client_options,
    append_result,
    machine,
    parse_size,
    produce_and_consume,
)

if TYPE_CHECKING:  # the child imports onceflow from the tree PYTHONPATH selects
    from onceflow.protocol.messages.metadata import MetadataResponse

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "source_compare.json"
BATCH_RECORDS = 256


def _batches(count: int, record_size: int) -> list[bytearray]:
    from onceflow.records.builder import BatchBuilder

    value = os.urandom(record_size)
    batches = []
    for i in range(count):
        builder = BatchBuilder(producer_id=7, producer_epoch=0, base_sequence=i * BATCH_RECORDS)
        for _ in range(BATCH_RECORDS):
            builder.append(1_700_000_000_000, None, value)
        batches.append(builder.build())
    return batches


def _log_paths(batches: int, record_size: int, segment_bytes: int) -> dict[str, float]:
    """CPU microseconds per append and per read of one batch (child process); segments of
    `segment_bytes` (0: the default, 1 GiB)."""
    from onceflow.log.config import LogConfig
    from onceflow.log.partition import PartitionLog

    data = _batches(batches, record_size)
    directory = tempfile.mkdtemp(prefix="onceflow-compare-")
    props = {"flush.on.ack": "false"}
    if segment_bytes:
        props["segment.bytes"] = str(segment_bytes)
    log = PartitionLog(directory, "compare", 0, LogConfig.from_properties(props))
    try:
        start = time.process_time()
        for batch in data:
            if log.append(batch).error:
                raise RuntimeError("append failed")
        appended = time.process_time() - start
        log.flush()  # the high watermark bounds reads
        start = time.process_time()
        offset = reads = 0
        while offset < log.log_end_offset:
            result = log.read(offset, 1, min_one_message=True)
            if result.error or not result.records:
                raise RuntimeError(f"read failed at {offset}")
            offset += BATCH_RECORDS
            reads += 1
        read = time.process_time() - start
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
    return {"append_us": appended / batches * 1e6, "read_us": read / reads * 1e6}


async def _txn_cycles(cycles: int) -> float:
    """CPU milliseconds per transaction: AddPartitionsToTxn, EndTxn, markers, COMPLETE_COMMIT
    (every thread of the process: the group commit's fsyncs run in a worker thread)."""
    from onceflow.common import TopicPartition
    from onceflow.coordinator.producer_id import ProducerIdManager
    from onceflow.coordinator.txn.config import TxnConfig
    from onceflow.coordinator.txn.coordinator import TransactionCoordinator
    from onceflow.log.manager import LogManager
    from onceflow.protocol.errors import ErrorCode

    directory = tempfile.mkdtemp(prefix="onceflow-compare-txn-")
    logs = LogManager(directory)
    logs.start()
    try:
        logs.create_topic("t", 2)
        config = TxnConfig(transaction_state_log_num_partitions=1, offsets_topic_num_partitions=1)
        coordinator = TransactionCoordinator(logs, ProducerIdManager(directory), config)
        await coordinator.load()
        init = await coordinator.handle_init_producer_id("tx", 60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        parts = [TopicPartition("t", 0), TopicPartition("t", 1)]
        start = time.process_time()
        for _ in range(cycles):
            added = await coordinator.handle_add_partitions("tx", pid, epoch, parts)
            if set(added.values()) != {ErrorCode.NONE}:
                raise RuntimeError(f"add partitions: {added}")
            if await coordinator.handle_end_txn("tx", pid, epoch, True) != ErrorCode.NONE:
                raise RuntimeError("end txn failed")
            await coordinator.wait_for_completions()
        elapsed = time.process_time() - start
        await coordinator.close()
    finally:
        await logs.shutdown()
        shutil.rmtree(directory, ignore_errors=True)
    return elapsed / cycles * 1e3


def _metadata_response() -> MetadataResponse:
    """A MetadataResponse of 3 brokers and 100 topics x 8 partitions (3 replicas each)."""
    from onceflow.protocol.messages.metadata import MetadataResponse

    topic, broker = MetadataResponse.MetadataResponseTopic, MetadataResponse.MetadataResponseBroker
    partition = topic.MetadataResponsePartition
    return MetadataResponse(
        brokers=[broker(node_id=n, host=f"broker-{n}.example", port=9092) for n in range(3)],
        cluster_id="bench-cluster",
        controller_id=0,
        topics=[
            topic(
                name=f"topic-{t}",
                partitions=[
                    partition(
                        partition_index=p,
                        leader_id=p % 3,
                        leader_epoch=5,
                        replica_nodes=[0, 1, 2],
                        isr_nodes=[0, 1, 2],
                    )
                    for p in range(8)
                ],
            )
            for t in range(100)
        ],
    )


def _codec_paths(seconds: float) -> dict[str, float]:
    """CPU microseconds per encode/decode of the broker's hot messages (child process)."""
    from protocol_codec import MIB, fetch_response, measure, produce_request

    from onceflow.protocol.messages.metadata import MetadataResponse
    from onceflow.protocol.messages.produce import ProduceRequest

    small_produce, big_produce = produce_request(1024, 1), produce_request(MIB, 3)
    small_fetch, big_fetch = fetch_response(1024, 1), fetch_response(MIB, 3)
    metadata = _metadata_response()
    metadata_bytes = metadata.encode(9)
    cases: dict[str, Callable[[], object]] = {
        "decode_produce_1k_us": lambda: ProduceRequest.decode(small_produce, 9),
        "decode_produce_1m_us": lambda: ProduceRequest.decode(big_produce, 9),
        "encode_fetch_1k_us": lambda: small_fetch.encode(12),
        "encode_fetch_1m_parts_us": lambda: big_fetch.encode_parts(12),
        "encode_metadata_us": lambda: metadata.encode(9),
        "decode_metadata_us": lambda: MetadataResponse.decode(metadata_bytes, 9),
    }
    return {name: 1e6 / measure(fn, seconds, time.process_time) for name, fn in cases.items()}


def _client_paths(records: int, record_size: int, transactions: int) -> dict[str, float]:
    """CPU microseconds per record of onceflow's Producer and Consumer, and CPU milliseconds
    per transaction of its transactional Producer (child process; the broker is another)."""
    from onceflow.cli.embedded_broker import EmbeddedBroker
    from onceflow.client.admin import AdminClient, NewTopic
    from onceflow.client.consumer import Consumer
    from onceflow.client.producer import Producer

    value = os.urandom(record_size)
    data_dir = tempfile.mkdtemp(prefix="onceflow-compare-client-")
    broker = EmbeddedBroker(Path(data_dir), 30)
    try:
        bootstrap = broker.address
        with AdminClient({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic("plain", 3, 1), NewTopic("txn", 3, 1)])
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        start = time.process_time()
        for i in range(records):
            producer.send("plain", value, partition=i % 3)
        producer.flush(300)
        produced = time.process_time() - start
        producer.close()
        consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
        consumer.assign([("plain", p) for p in range(3)])
        got, start, deadline = 0, time.process_time(), time.monotonic() + 300
        while got < records and time.monotonic() < deadline:
            got += len(consumer.poll(0.5))
        consumed = time.process_time() - start
        consumer.close()
        if got < records:
            raise RuntimeError(f"consumed {got} of {records}")
        txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "compare"})
        txn.init_transactions(30)
        start = time.process_time()
        for t in range(transactions):
            txn.begin_transaction()
            for i in range(10):
                txn.send("txn", value, partition=(t + i) % 3)
            txn.commit_transaction(30)
        committed = time.process_time() - start
        txn.close()
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return {
        "client_produce_us": produced / records * 1e6,
        "client_consume_us": consumed / records * 1e6,
        "client_txn_ms": committed / transactions * 1e3,
    }


def child(args: argparse.Namespace) -> int:
    """The in-process measurements with whatever `onceflow` PYTHONPATH selects."""
    result: dict[str, float] = {}
    if "log" in args.measure:
        result.update(_log_paths(args.batches, args.record_size, args.segment_bytes))
    if "txn" in args.measure:
        result["txn_ms"] = asyncio.run(_txn_cycles(args.txn_cycles))
    if "client" in args.measure:
        result.update(_client_paths(args.client_records, args.record_size, args.txn_cycles))
    if "codec" in args.measure:
        result.update(_codec_paths(args.codec_seconds))
    print(json.dumps(result))
    return 0


def _run_child(src: Path, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--batches",
        str(args.batches),
        "--segment-bytes",
        str(args.segment_bytes),
        "--txn-cycles",
        str(args.txn_cycles),
        "--record-size",
        str(args.record_size),
        "--measure",
        ",".join(args.measure),
        "--codec-seconds",
        str(args.codec_seconds),
        "--client-records",
        str(args.client_records),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run_broker(src: Path, args: argparse.Namespace) -> dict[str, float]:
    """Produce and consume MB/s through a broker started from `src`."""
    produced, consumed = produce_and_consume(args, src)
    return {"produce_mb_s": produced["mb_per_s"], "consume_mb_s": consumed["mb_per_s"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, default=Path("/work/main"))
    parser.add_argument("--after", type=Path, default=HERE.parent)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=400, help="append/read batches")
    parser.add_argument(
        "--segment-bytes", type=parse_size, default=0, help="append/read segments (0: 1 GiB)"
    )
    parser.add_argument("--txn-cycles", type=int, default=200)
    parser.add_argument("--bytes", type=parse_size, default=64 << 20, help="default 64MiB")
    parser.add_argument("--seconds", type=float, default=20.0, help="broker produce bound")
    add_client_options(parser)
    parser.add_argument("--no-broker", action="store_true", help="in-process measurements only")
    parser.add_argument(
        "--measure",
        type=lambda text: text.split(","),
        default=["log", "txn", "client", "codec", "broker"],
        help="comma-separated: log, txn, client, codec, broker (default all)",
    )
    parser.add_argument("--client-records", type=int, default=50_000)
    parser.add_argument("--codec-seconds", type=float, default=0.5, help="CPU time per case")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    trees = {"before": args.before / "src", "after": args.after / "src"}
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_ in range(args.rounds):
        order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
        for name in order:
            sample = _run_child(trees[name], args)
            if "broker" in args.measure and not args.no_broker:
                sample.update(_run_broker(trees[name], args))
            samples[name].append(sample)
    medians = {
        name: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
        for name, runs in samples.items()
    }
    # the best run of each tree: least disturbed by the machine's other work
    best = {
        name: {
            key: (max if key.endswith("_mb_s") else min)(s[key] for s in runs) for key in runs[0]
        }
        for name, runs in samples.items()
    }
    ratios = {key: medians["after"][key] / medians["before"][key] for key in medians["after"]}
    best_ratios = {key: best["after"][key] / best["before"][key] for key in best["after"]}
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    summary = (
        f"{now} after/before, medians: "
        + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items())
        + "; best runs: "
        + ", ".join(f"{k} {v:.3f}" for k, v in best_ratios.items())
    )
    run = {
        "date": now,
        "machine": machine(),
        "trees": {name: str(path) for name, path in trees.items()},
        "config": {k: v for k, v in vars(args).items() if k not in ("out", "child")},
        "samples": samples,
        "medians": medians,
        "best": best,
        "after_over_before": ratios,
        "best_after_over_before": best_ratios,
        "summary": summary,
    }
    for key in ("before", "after", "out"):
        run["config"].pop(key, None)
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
