"""`onceflow produce TOPIC`: a console producer, shaped like kafka-console-producer.sh and kcat -P.

Reads records from standard input (or `--file`) as bytes, one per delimiter (a newline by
default; `--delimiter '\\0'` for values that contain newlines), so any bytes pass through
unchanged. With `--key-separator SEP` each record is split at the first SEP into key and value
(a record without SEP is a usage error, as in Kafka with parse.key=true). `--header K=V`
(repeatable) adds headers to every record, `--partition N` pins the partition.

Delivery is idempotent (acks=all). With `--transactional-id ID` the whole input goes in one
transaction: committed at end of input, aborted on any error or interrupt, so a consumer with
isolation.level=read_committed sees all of it or none. Exit codes: 0 all delivered (or
committed), 1 a delivery or broker error (one line on stderr), 2 bad usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from onceflow.cli.namespace import Subparsers, from_args, value
from onceflow.cli.options import client_properties, fail, topic_command, unescape
from onceflow.client.errors import KafkaError
from onceflow.client.producer import Producer
from onceflow.client.producer.futures import RecordMetadata

NAME = "produce"
READ_SIZE = 1 << 16


@dataclass(frozen=True)
class ProduceOptions:
    parser: argparse.ArgumentParser
    topic: str
    file: str | None
    delimiter: str
    key_separator: str | None
    partition: int | None
    header: list[str]
    transactional_id: str | None


def add_parser(subparsers: Subparsers) -> None:
    """Register the `produce` sub-command."""
    parser = topic_command(
        subparsers, NAME, "write records from standard input to a topic", __doc__
    )
    parser.add_argument("--file", metavar="PATH", help="read records from PATH, not stdin")
    parser.add_argument(
        "--delimiter", default="\\n", metavar="SEP", help="record delimiter (default \\n)"
    )
    parser.add_argument(
        "--key-separator", metavar="SEP", help="split each record into key SEP value"
    )
    parser.add_argument("--partition", type=int, metavar="N", help="write to partition N")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="header added to every record (repeatable)",
    )
    parser.add_argument(
        "--transactional-id", metavar="ID", help="write everything in one transaction"
    )
    parser.set_defaults(func=run, parser=parser)


def _headers(parser: argparse.ArgumentParser, items: list[str]) -> list[tuple[str, bytes]]:
    headers = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--header {item!r}: expected KEY=VALUE")
        headers.append((key, value.encode()))
    return headers


def records(
    stream: io.BufferedIOBase, delimiter: bytes, key_separator: bytes | None
) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) pairs from `stream` as they arrive, split at `delimiter` (a trailing one
    ends the last record; it does not start an empty one)."""
    pending = b""
    number = 0
    while True:
        chunk = stream.read1(READ_SIZE)
        if chunk:
            pending += chunk
            *parts, pending = pending.split(delimiter)
        else:
            parts, pending = ([pending] if pending else []), b""
        for part in parts:
            number += 1
            if key_separator is None:
                yield None, part
                continue
            key, sep, value = part.partition(key_separator)
            if not sep:
                raise ValueError(f"record {number} has no key separator {key_separator!r}")
            yield key, value
        if not chunk:
            return


def run(namespace: argparse.Namespace) -> int:
    args = from_args(ProduceOptions, namespace)
    parser = args.parser
    delimiter = unescape(args.delimiter)
    key_separator = None if args.key_separator is None else unescape(args.key_separator)
    if not delimiter:
        parser.error("--delimiter must not be empty")
    headers = _headers(parser, args.header)
    config = client_properties(namespace)
    timeout_s = value(namespace, "request_timeout_ms", int) / 1000  # set by client_properties
    config["acks"] = "all"
    if args.transactional_id:
        config["transactional.id"] = args.transactional_id
    try:
        # sys.stdin.buffer is a BufferedReader (typeshed says BinaryIO, which lacks read1)
        stdin = cast(io.BufferedIOBase, sys.stdin.buffer)
        stream = open(args.file, "rb") if args.file else stdin  # noqa: SIM115
    except OSError as exc:
        return fail(NAME, f"cannot read {args.file}: {exc.strerror}")
    try:
        records_in = records(stream, delimiter, key_separator)
        return _produce(args, config, timeout_s, records_in, headers)
    finally:
        if args.file:
            stream.close()


def _produce(
    args: ProduceOptions,
    config: dict[str, Any],
    timeout_s: float,
    records_in: Iterator[tuple[bytes | None, bytes]],
    headers: list[tuple[str, bytes]],
) -> int:
    producer = Producer(config)
    transactional = bool(args.transactional_id)
    in_transaction = False
    delivered: list[int] = [0]
    errors: list[BaseException] = []

    def on_delivery(error: BaseException | None, _metadata: RecordMetadata | None) -> None:
        if error is None:
            delivered[0] += 1
        else:
            errors.append(error)

    try:
        if transactional:
            producer.init_transactions(timeout_s)
            producer.begin_transaction()
            in_transaction = True
        for key, value in records_in:
            producer.send(
                args.topic,
                value,
                key=key,
                partition=args.partition,
                headers=headers or None,
                on_delivery=on_delivery,
            )
            if errors:
                break
        producer.flush(timeout_s)
        if errors:
            raise errors[0]
        if transactional:
            producer.commit_transaction(timeout_s)
            in_transaction = False
    except ValueError as exc:
        _abort(producer, in_transaction)
        print(f"onceflow {NAME}: {exc}", file=sys.stderr)
        return 2
    except (KafkaError, OSError) as exc:
        _abort(producer, in_transaction)
        return fail(NAME, f"{args.topic}: {exc}")
    except KeyboardInterrupt:
        _abort(producer, in_transaction)
        print(f"onceflow {NAME}: interrupted", file=sys.stderr)
        return 130
    finally:
        producer.close(5)
    what = "committed" if transactional else "delivered"
    print(f"{delivered[0]} records {what} to {args.topic}", file=sys.stderr)
    return 0


def _abort(producer: Producer, in_transaction: bool) -> None:
    """Abort the open transaction, if any; an abort that fails leaves it to time out."""
    if not in_transaction:
        return
    try:
        producer.abort_transaction(10)
        print(f"onceflow {NAME}: transaction aborted", file=sys.stderr)
    except (KafkaError, OSError) as exc:
        print(
            f"onceflow {NAME}: abort failed ({exc}); the broker aborts the transaction "
            "after transaction.timeout.ms",
            file=sys.stderr,
        )
