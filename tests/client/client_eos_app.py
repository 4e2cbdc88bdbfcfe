"""A consume-transform-produce application with exactly-once semantics, using onceflow's client.

The onceflow twin of `tests/support/eos_app.py` (seed 004's `ExactlyOnceMessageProcessor`
pattern, our own code): a consumer in `--group` (read_committed, no auto-commit) subscribed
to `--input`, and a transactional producer (`--transactional-id`, fixed per application
instance). For every poll batch: begin_transaction -> send the transformed records to
`--output` (same partition as the input record) -> send_offsets_to_transaction(positions,
consumer_group_metadata()) -> commit_transaction (retried after a timeout). An error that
requires an abort: abort_transaction, rewind the consumer to the group's committed offsets,
go on. A fatal error (fenced by a newer instance): exit with status 3.

`--hold-file PATH` (for fault tests): while PATH exists, the application stops inside its
next transaction, after that transaction's records were flushed to the log, creates
`PATH.held` and waits there — so a kill -9 is known to land mid-transaction.

Run: `python tests/client/client_eos_app.py --bootstrap HOST:PORT --input IN --output OUT
--group G --transactional-id ID`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from support.eos_app import transform  # noqa: E402 - the same transformation as the twin

from onceflow.client import Consumer, Producer  # noqa: E402
from onceflow.client.errors import KafkaError, KafkaTimeoutError  # noqa: E402

log = logging.getLogger("client_eos_app")
EXIT_FATAL = 3
TXN_TIMEOUT_S = 30.0


class Stop:
    """Set by SIGTERM/SIGINT."""

    requested = False

    @classmethod
    def install(cls) -> None:
        def handler(signum, frame):
            cls.requested = True

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def make_clients(args) -> tuple[Consumer, Producer]:
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(100, args.session_timeout_ms // 6),
            "max.poll.interval.ms": 20_000,
            "max.poll.records": args.batch,
            "client.id": f"eos-consumer-{args.transactional_id}",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": 60_000,
            "linger.ms": 5,
            "client.id": f"eos-producer-{args.transactional_id}",
        }
    )
    return consumer, producer


def rewind_to_committed(consumer: Consumer) -> None:
    """Seek each assigned partition back to the group's committed offset (0 when none)."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp, committed in consumer.committed(assignment, timeout=TXN_TIMEOUT_S).items():
        consumer.seek(tp, committed.offset if committed is not None else 0)
    log.info("rewound to %s", {tp.partition: consumer.position(tp) for tp in assignment})


def commit(producer: Producer) -> None:
    """commit_transaction, called again after a timeout (never turned into an abort)."""
    while True:
        try:
            producer.commit_transaction(TXN_TIMEOUT_S)
            return
        except KafkaTimeoutError as exc:
            log.warning("commit_transaction timed out (%s); retrying", exc)


def hold_if_asked(producer: Producer, hold_file: Path | None) -> None:
    if hold_file is None or not hold_file.exists():
        return
    producer.flush(TXN_TIMEOUT_S)
    Path(f"{hold_file}.held").touch()
    log.info("holding inside a transaction")
    while hold_file.exists() and not Stop.requested:
        time.sleep(0.05)


def process_batch(consumer: Consumer, producer: Producer, args, records) -> int:
    """One transaction: the transformed records and the consumer's positions."""
    producer.begin_transaction()
    for r in records:
        producer.send(
            args.output, transform(r.partition, r.offset, r.value), key=r.key, partition=r.partition
        )
    hold_if_asked(producer, args.hold_file)
    positions = {tp: consumer.position(tp) for tp in consumer.assignment()}
    producer.send_offsets_to_transaction(
        positions, consumer.consumer_group_metadata(), TXN_TIMEOUT_S
    )
    commit(producer)
    return len(records)


def run(args) -> int:
    consumer, producer = make_clients(args)
    processed = transactions = 0
    try:
        producer.init_transactions(TXN_TIMEOUT_S * 2)
        consumer.subscribe([args.input])
        last_report = time.monotonic()
        while not Stop.requested:
            records = consumer.poll(0.2)
            if not records:
                continue
            try:
                processed += process_batch(consumer, producer, args, records)
                transactions += 1
            except KafkaError as exc:
                if exc.fatal:
                    log.error("fatal transaction error: %r", exc)
                    return EXIT_FATAL
                log.warning("aborting transaction after: %s", exc)
                producer.abort_transaction(TXN_TIMEOUT_S)
                rewind_to_committed(consumer)
            if time.monotonic() - last_report > 2:
                last_report = time.monotonic()
                log.info("%d records in %d transactions", processed, transactions)
    finally:
        log.info("stopping after %d records in %d transactions", processed, transactions)
        consumer.close()
        producer.close(10)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--batch", type=int, default=500, help="records per poll batch")
    parser.add_argument("--session-timeout-ms", type=int, default=3000)
    parser.add_argument("--hold-file", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s {args.transactional_id} %(levelname)s %(name)s %(message)s",
    )
    Stop.install()
    try:
        return run(args)
    except KafkaError as exc:
        log.error("unrecoverable: %r", exc)
        return EXIT_FATAL


if __name__ == "__main__":
    sys.exit(main())
