"""A consume-transform-produce application with exactly-once semantics, on confluent-kafka
(`--client confluent`, the default) or on onceflow's own client (`--client onceflow`).

Our own code after the pattern of Kafka's `ExactlyOnceMessageProcessor` example and the
exactly-once chapter of *Kafka: The Definitive Guide* (seed 004):

- a consumer in group `--group` (isolation.level=read_committed, enable.auto.commit=false)
  subscribed to `--input`;
- a transactional producer (`--transactional-id`, fixed per application instance), which for
  every poll batch runs begin_transaction -> produce the transformed records to `--output` ->
  send_offsets_to_transaction(the consumer's positions, consumer_group_metadata()) ->
  commit_transaction (retried while the error is retriable: a commit that timed out must be
  retried, not turned into an abort);
- an error that requires an abort: abort_transaction, then rewind the consumer to the group's
  committed offsets and carry on; a fatal error (for example fenced by a newer instance):
  exit with status 3;
- an authorization failure (TOPIC_, GROUP_, CLUSTER_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  from the consumer or the producer): no retry can help until an operator adds the ACL, so the
  open transaction (if any) is aborted, one line `authorization failed: ...` is logged and the
  application exits with status 4.

`transform(partition, offset, value)` is `VALUE.upper() + b"|" + partition + b"|" + offset`, so
every output record names the input record it came from. The output record goes to the input
record's partition. SIGTERM or SIGINT stops the loop after the current transaction and closes
the clients. Progress and errors go to stderr; nothing is printed on stdout.

`-X KEY=VALUE` (repeatable) adds a client property to both clients, e.g. the security
settings (`security.protocol`, `sasl.mechanism`, `sasl.username`, `sasl.password`,
`ssl.ca.location`); `--transaction-timeout-ms` sets the producer's transaction.timeout.ms
(default 60000); `--exit-after N` stops with status 0 once N records were committed.

`--hold-file PATH` (for fault tests): while PATH exists, the application stops inside its
next transaction, after that transaction's records were flushed to the log, creates
`PATH.held` and waits there, so a kill -9 is known to land mid-transaction.

Run: `python tests/support/eos_app.py --bootstrap HOST:PORT --input IN --output OUT --group G
--transactional-id ID [--client onceflow] [-X KEY=VALUE ...]`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

log = logging.getLogger("eos_app")

EXIT_FATAL = 3
EXIT_DENIED = 4
TXN_TIMEOUT_S = 30.0
# TOPIC_, GROUP_, CLUSTER_ and TRANSACTIONAL_ID_AUTHORIZATION_FAILED
AUTHORIZATION_FAILED = frozenset({29, 30, 31, 53})


class AuthorizationDenied(Exception):
    """The consumer reported an authorization failure as an event."""


def transform(partition: int, offset: int, value: bytes) -> bytes:
    """The output value for input record (`partition`, `offset`) with `value`."""
    return value.upper() + b"|%d|%d" % (partition, offset)


def parse_output(value: bytes) -> tuple[bytes, int, int]:
    """Inverse of `transform`: (upper-cased input value, input partition, input offset)."""
    body, partition, offset = value.rsplit(b"|", 2)
    return body, int(partition), int(offset)


def exactly_once_problems(
    outputs: Iterable[tuple[int, bytes]], inputs: Mapping[tuple[int, int], bytes]
) -> list[str]:
    """What keeps `outputs` ((output partition, value), read with read_committed) from being
    the exactly-once transformation of `inputs` ({(partition, offset): value}): a record that
    transforms no input, an input transformed twice or not at all. Empty when exact."""
    problems: list[str] = []
    seen: Counter[tuple[int, int]] = Counter()
    for partition, value in outputs:
        _body, in_partition, in_offset = parse_output(value)
        source = inputs.get((in_partition, in_offset))
        if source is None or partition != in_partition:
            problems.append(f"unexpected output {value!r} in partition {partition}")
        elif value != transform(in_partition, in_offset, source):
            problems.append(f"wrong output {value!r} for input {source!r}")
        seen[(in_partition, in_offset)] += 1
    duplicated = sorted(key for key, count in seen.items() if count > 1)
    missing = sorted(key for key in inputs if key not in seen)
    if duplicated:
        problems.append(f"{len(duplicated)} inputs duplicated, e.g. {duplicated[:5]}")
    if missing:
        problems.append(f"{len(missing)} inputs missing, e.g. {missing[:5]}")
    return problems


class Stop:
    """Set by SIGTERM/SIGINT."""

    requested = False

    @classmethod
    def install(cls) -> None:
        def handler(signum, frame):
            cls.requested = True

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


class Record(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes


def consumer_config(args) -> dict[str, Any]:
    return {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": args.session_timeout_ms,
        "heartbeat.interval.ms": max(100, args.session_timeout_ms // 6),
        "client.id": f"eos-consumer-{args.transactional_id}",
        **args.property,
    }


def producer_config(args) -> dict[str, Any]:
    return {
        "bootstrap.servers": args.bootstrap,
        "transactional.id": args.transactional_id,
        "transaction.timeout.ms": args.transaction_timeout_ms,
        "linger.ms": 5,
        "client.id": f"eos-producer-{args.transactional_id}",
        **args.property,
    }


class ConfluentClients:
    """The application's client calls on confluent-kafka (librdkafka)."""

    def __init__(self, args) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

        self.error_type = KafkaException
        self.fenced = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED)
        self.fenced += (KafkaError.INVALID_PRODUCER_EPOCH,)
        self.consumer = Consumer(consumer_config(args))
        self.producer = Producer(producer_config(args))
        self.denied_delivery = None  # a delivery report's authorization failure

    def poll(self, batch: int) -> list[Record]:
        messages = self.consumer.consume(num_messages=batch, timeout=0.2)
        for msg in messages:
            if msg.error() is None:
                continue
            if msg.error().code() in AUTHORIZATION_FAILED:
                raise AuthorizationDenied(str(msg.error()))
            log.info("consumer event: %s", msg.error())
        return [
            Record(m.partition(), m.offset(), m.key(), m.value())
            for m in messages
            if m.error() is None
        ]

    def send(self, topic: str, record: Record, value: bytes) -> None:
        self.producer.produce(
            topic,
            key=record.key,
            value=value,
            partition=record.partition,
            on_delivery=self._delivered,
        )

    def _delivered(self, err, msg) -> None:
        if err is not None and err.code() in AUTHORIZATION_FAILED:
            self.denied_delivery = err

    def send_offsets(self) -> None:
        positions = self.consumer.position(self.consumer.assignment())
        self.producer.send_offsets_to_transaction(
            [tp for tp in positions if tp.offset >= 0],
            self.consumer.consumer_group_metadata(),
            TXN_TIMEOUT_S,
        )

    def commit_retriable(self, exc: Exception) -> bool:
        error = exc.args[0]
        return error.retriable() and not error.txn_requires_abort()

    def is_fatal(self, exc: Exception) -> bool:
        error = exc.args[0]
        return error.fatal() or error.code() in self.fenced

    def denial(self, exc: Exception) -> str | None:
        """The authorization failure behind `exc`: its own error, or (when a commit failed
        because records were not delivered) the delivery reports'."""
        if exc.args[0].code() in AUTHORIZATION_FAILED:
            return str(exc)
        self.producer.poll(0)  # serve the delivery reports still queued
        return None if self.denied_delivery is None else f"{exc}: {self.denied_delivery}"

    def rewind(self) -> None:
        assignment = self.consumer.assignment()
        for tp in self.consumer.committed(assignment, timeout=TXN_TIMEOUT_S):
            tp.offset = max(tp.offset, 0)  # nothing committed: the input starts at 0
            self.consumer.seek(tp)

    def close(self) -> None:
        self.consumer.close()
        try:
            self.producer.flush(10)
        except self.error_type as exc:  # a producer in a fatal state raises its error again
            log.info("flush on close: %s", exc)


class OnceflowClients:
    """The application's client calls on onceflow's own client."""

    def __init__(self, args) -> None:
        from onceflow.client import Consumer, Producer
        from onceflow.client.errors import KafkaError, KafkaTimeoutError

        self.error_type = KafkaError
        self.timeout_type = KafkaTimeoutError
        extra = {"max.poll.interval.ms": 20_000, "max.poll.records": args.batch}
        self.consumer = Consumer({**consumer_config(args), **extra})
        self.producer = Producer(producer_config(args))

    def poll(self, batch: int) -> list[Record]:
        return [Record(r.partition, r.offset, r.key, r.value) for r in self.consumer.poll(0.2)]

    def send(self, topic: str, record: Record, value: bytes) -> None:
        self.producer.send(topic, value, key=record.key, partition=record.partition)

    def send_offsets(self) -> None:
        positions = {tp: self.consumer.position(tp) for tp in self.consumer.assignment()}
        self.producer.send_offsets_to_transaction(
            positions, self.consumer.consumer_group_metadata(), TXN_TIMEOUT_S
        )

    def commit_retriable(self, exc: Exception) -> bool:
        return isinstance(exc, self.timeout_type)

    def is_fatal(self, exc: Exception) -> bool:
        return exc.fatal

    def denial(self, exc: Exception) -> str | None:
        return repr(exc) if exc.code in AUTHORIZATION_FAILED else None

    def rewind(self) -> None:
        assignment = self.consumer.assignment()
        committed = self.consumer.committed(assignment, timeout=TXN_TIMEOUT_S)
        for tp, offset in committed.items():
            self.consumer.seek(tp, offset.offset if offset is not None else 0)

    def close(self) -> None:
        self.consumer.close()
        self.producer.close(10)


CLIENTS = {"confluent": ConfluentClients, "onceflow": OnceflowClients}


def commit(clients) -> None:
    """commit_transaction, called again while the error is retriable."""
    while True:
        try:
            clients.producer.commit_transaction(TXN_TIMEOUT_S)
            return
        except clients.error_type as exc:
            if not clients.commit_retriable(exc):
                raise
            log.warning("commit_transaction retriable error: %s; retrying", exc)


def hold_if_asked(clients, hold_file: Path | None) -> None:
    if hold_file is None or not hold_file.exists():
        return
    clients.producer.flush(TXN_TIMEOUT_S)
    Path(f"{hold_file}.held").touch()
    log.info("holding inside a transaction")
    while hold_file.exists() and not Stop.requested:
        time.sleep(0.05)


def process_batch(clients, args, records: list[Record]) -> int:
    """One transaction: the transformed records and the consumer's positions."""
    clients.producer.begin_transaction()
    for r in records:
        clients.send(args.output, r, transform(r.partition, r.offset, r.value))
    hold_if_asked(clients, args.hold_file)
    clients.send_offsets()
    commit(clients)
    return len(records)


def abort_after_denial(clients, denial: str) -> int:
    """Abort the open transaction (when the producer still can) and report the denial."""
    try:
        clients.producer.abort_transaction(TXN_TIMEOUT_S)
    except clients.error_type as abort_exc:
        log.info("abort_transaction after the denial: %s", abort_exc)
    log.error("authorization failed: %s", denial)
    return EXIT_DENIED


def run(args) -> int:
    clients = CLIENTS[args.client](args)
    processed = transactions = 0
    try:
        clients.producer.init_transactions(TXN_TIMEOUT_S * 2)
        clients.consumer.subscribe([args.input])
        last_report = time.monotonic()
        while not Stop.requested and (args.exit_after is None or processed < args.exit_after):
            records = clients.poll(args.batch)
            if not records:
                continue
            try:
                processed += process_batch(clients, args, records)
                transactions += 1
            except clients.error_type as exc:
                denial = clients.denial(exc)
                if denial is not None:
                    return abort_after_denial(clients, denial)
                if clients.is_fatal(exc):
                    log.error("fatal transaction error: %r", exc)
                    return EXIT_FATAL
                log.warning("aborting transaction after: %s", exc)
                clients.producer.abort_transaction(TXN_TIMEOUT_S)
                clients.rewind()
                log.info("rewound to the group's committed offsets")
            if time.monotonic() - last_report > 2:
                last_report = time.monotonic()
                log.info("%d records in %d transactions", processed, transactions)
    except AuthorizationDenied as exc:  # from poll: no transaction is open
        log.error("authorization failed: %s", exc)
        return EXIT_DENIED
    except clients.error_type as exc:
        denial = clients.denial(exc)
        if denial is not None:
            log.error("authorization failed: %s", denial)
            return EXIT_DENIED
        log.error("unrecoverable: %r", exc)
        return EXIT_FATAL
    finally:
        log.info("stopping after %d records in %d transactions", processed, transactions)
        clients.close()
    return 0


def client_property(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--client", choices=sorted(CLIENTS), default="confluent")
    parser.add_argument("--batch", type=int, default=500, help="records per poll batch")
    parser.add_argument("--session-timeout-ms", type=int, default=3000)
    parser.add_argument("--hold-file", type=Path, default=None)
    parser.add_argument("--transaction-timeout-ms", type=int, default=60_000)
    parser.add_argument("--exit-after", type=int, default=None, metavar="N")
    parser.add_argument("-X", dest="property", type=client_property, action="append", default=[])
    args = parser.parse_args(argv)
    args.property = dict(args.property)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(asctime)s {args.transactional_id} %(levelname)s %(name)s %(message)s",
    )
    Stop.install()
    # the test's terminate() waits for this line: before it, SIGTERM would kill the process
    log.info("started pid=%d, SIGTERM handler installed", os.getpid())
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
