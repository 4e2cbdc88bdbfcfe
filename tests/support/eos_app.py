"""A consume-transform-produce application with exactly-once semantics, using confluent-kafka.

Our own code after the pattern of Kafka's `ExactlyOnceMessageProcessor` example and the
exactly-once chapter of *Kafka: The Definitive Guide* (seed 004):

- a consumer in group `--group` (isolation.level=read_committed, enable.auto.commit=false)
  subscribed to `--input`;
- a transactional producer (`--transactional-id`, fixed per application instance), which for
  every poll batch runs begin_transaction -> produce the transformed records to `--output` ->
  send_offsets_to_transaction(consumer.position(assignment), consumer_group_metadata()) ->
  commit_transaction;
- an error that requires an abort: abort_transaction, then rewind the consumer to the group's
  committed offsets and carry on; a retriable error in commit: retry the commit; a fatal error
  (for example fenced by a newer instance): exit with status 3.

`transform(partition, offset, value)` is `VALUE.upper() + b"|" + partition + b"|" + offset`, so
every output record names the input record it came from. The output record goes to the input
record's partition. SIGTERM or SIGINT stops the loop after the current transaction and closes
the clients. Progress and errors go to stderr; nothing is printed on stdout.

Run: `python tests/support/eos_app.py --bootstrap HOST:PORT --input IN --output OUT --group G
--transactional-id ID`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

log = logging.getLogger("eos_app")

EXIT_FATAL = 3
TXN_TIMEOUT_S = 30.0


def transform(partition: int, offset: int, value: bytes) -> bytes:
    """The output value for input record (`partition`, `offset`) with `value`."""
    return value.upper() + b"|%d|%d" % (partition, offset)


def parse_output(value: bytes) -> tuple[bytes, int, int]:
    """Inverse of `transform`: (upper-cased input value, input partition, input offset)."""
    body, partition, offset = value.rsplit(b"|", 2)
    return body, int(partition), int(offset)


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
            "client.id": f"eos-consumer-{args.transactional_id}",
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "transaction.timeout.ms": 60000,
            "linger.ms": 5,
            "client.id": f"eos-producer-{args.transactional_id}",
        }
    )
    return consumer, producer


def rewind_to_committed(consumer: Consumer) -> None:
    """Seek every assigned partition back to the group's committed offset (or the beginning
    when nothing is committed): the records of an aborted transaction are processed again."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=TXN_TIMEOUT_S):
        if tp.offset < 0:
            tp.offset = 0  # auto.offset.reset=earliest: the input starts at 0
        consumer.seek(tp)
    log.info("rewound to %s", {tp.partition: tp.offset for tp in consumer.position(assignment)})


def commit(producer: Producer) -> None:
    """commit_transaction, retried while the error is retriable (a commit that timed out must
    be retried, not turned into an abort)."""
    while True:
        try:
            producer.commit_transaction(TXN_TIMEOUT_S)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if error.retriable() and not error.txn_requires_abort():
                log.warning("commit_transaction retriable error: %s; retrying", error)
                continue
            raise


def process_batch(consumer: Consumer, producer: Producer, output: str, messages) -> int:
    """One transaction: the transformed records and the consumer's positions."""
    producer.begin_transaction()
    for msg in messages:
        producer.produce(
            output,
            key=msg.key(),
            value=transform(msg.partition(), msg.offset(), msg.value()),
            partition=msg.partition(),
        )
    positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
    producer.send_offsets_to_transaction(
        positions, consumer.consumer_group_metadata(), TXN_TIMEOUT_S
    )
    commit(producer)
    return len(messages)


def run(args) -> int:
    consumer, producer = make_clients(args)
    producer.init_transactions(TXN_TIMEOUT_S * 2)
    consumer.subscribe([args.input])
    processed = transactions = 0
    last_report = time.monotonic()
    try:
        while not Stop.requested:
            messages = consumer.consume(num_messages=args.batch, timeout=0.2)
            errors = [m for m in messages if m.error() is not None]
            for msg in errors:
                log.info("consumer event: %s", msg.error())
            messages = [m for m in messages if m.error() is None]
            if not messages:
                continue
            try:
                processed += process_batch(consumer, producer, args.output, messages)
                transactions += 1
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal() or error.code() in (
                    KafkaError._FENCED,
                    KafkaError.PRODUCER_FENCED,
                    KafkaError.INVALID_PRODUCER_EPOCH,
                ):
                    log.error("fatal transaction error: %s", error)
                    return EXIT_FATAL
                log.warning("aborting transaction after: %s", error)
                producer.abort_transaction(TXN_TIMEOUT_S)
                rewind_to_committed(consumer)
            if time.monotonic() - last_report > 2:
                last_report = time.monotonic()
                log.info("%d records in %d transactions", processed, transactions)
    finally:
        log.info("stopping after %d records in %d transactions", processed, transactions)
        consumer.close()
        producer.flush(10)
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
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s {args.transactional_id} %(levelname)s %(message)s",
    )
    Stop.install()
    # the test's terminate() waits for this line: before it, SIGTERM would kill the process
    log.info("started pid=%d, SIGTERM handler installed", os.getpid())
    try:
        return run(args)
    except KafkaException as exc:
        log.error("unrecoverable: %s", exc)
        return EXIT_FATAL


if __name__ == "__main__":
    sys.exit(main())
