"""`onceflow consume TOPIC`: a console consumer, shaped like kafka-console-consumer.sh and kcat -C.

Reads with isolation.level=read_committed unless `--isolation read_uncommitted`: records of
open transactions wait until they commit and aborted ones never appear. Without `--group` it
reads every partition (or `--partition N`) with assign(), from the end unless told
`--from-beginning`, `--offset beginning|end|N` or `--timestamp T` (milliseconds since the epoch
or ISO-8601 such as 2026-11-23T10:00:00Z; no zone means UTC). With `--group G` it joins the
consumer group and starts at the group's committed offsets, committing as it goes and when it
stops (`--from-beginning` then applies only where the group has no offset).

Output is binary-safe: `-f FORMAT` (kcat's tokens) decides what is written per record;
%s value, %k key, %t topic, %p partition, %o offset, %T timestamp (ms), %h headers (k=v,...),
%S value length, %K key length, %% a percent sign; \\n \\t \\0 escapes. The default is the
value and a newline. It stops after `--max-messages N`, after `--timeout-ms MS` without a
record (counted once it has partitions), or on SIGINT; then it prints "Processed a total of
N messages" to stderr. Exit codes: 0 done, 1 broker error or unknown topic, 2 bad usage,
130 interrupted.
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from onceflow.cli.namespace import Subparsers, from_args
from onceflow.cli.options import client_properties, fail, topic_command, unescape
from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.client.consumer import Consumer, ConsumerRecord
from onceflow.client.errors import KafkaError
from onceflow.common import TopicPartition

NAME = "consume"
_TOKEN = re.compile(rb"%(.)")
Render = Callable[[ConsumerRecord], bytes]
_FIELDS: dict[bytes, Render] = {
    b"s": lambda r: r.value or b"",
    b"k": lambda r: r.key or b"",
    b"t": lambda r: r.topic.encode(),
    b"p": lambda r: b"%d" % r.partition,
    b"o": lambda r: b"%d" % r.offset,
    b"T": lambda r: b"%d" % r.timestamp,
    b"S": lambda r: b"%d" % (-1 if r.value is None else len(r.value)),
    b"K": lambda r: b"%d" % (-1 if r.key is None else len(r.key)),
    b"h": lambda r: b",".join(k.encode() + b"=" + (v or b"") for k, v in r.headers),
    b"%": lambda r: b"%",
}


@dataclass(frozen=True)
class ConsumeOptions:
    parser: argparse.ArgumentParser
    topic: str
    group: str | None
    partition: int | None
    from_beginning: bool
    offset: str | None
    timestamp: str | None
    isolation: str
    max_messages: int | None
    timeout_ms: int | None
    format: str


def add_parser(subparsers: Subparsers) -> None:
    """Register the `consume` sub-command."""
    parser = topic_command(
        subparsers, NAME, "print a topic's records (read_committed by default)", __doc__
    )
    parser.add_argument("--group", metavar="G", help="consume as a member of group G")
    parser.add_argument("--partition", type=int, metavar="N", help="only partition N")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest")
    start.add_argument("--offset", metavar="beginning|end|N", help="start offset (one partition)")
    start.add_argument("--timestamp", metavar="T", help="start at the first record at/after T")
    parser.add_argument(
        "--isolation",
        type=str.lower,
        choices=["read_committed", "read_uncommitted"],
        default="read_committed",
        help="isolation.level (default read_committed)",
    )
    parser.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    parser.add_argument("--timeout-ms", type=int, metavar="MS", help="stop after MS idle")
    parser.add_argument(
        "-f", "--format", default="%s\\n", metavar="FORMAT", help="output format (default %%s\\n)"
    )
    parser.set_defaults(func=run, parser=parser)


def formatter(fmt: str) -> Render:
    """`-f FORMAT` -> a function from a record to the bytes to write."""
    template = unescape(fmt)
    pieces: list[bytes | Render] = []
    position = 0
    for match in _TOKEN.finditer(template):
        field = _FIELDS.get(match.group(1))
        if field is None:
            raise ValueError(f"unknown format token %{match.group(1).decode(errors='replace')}")
        pieces.append(template[position : match.start()])
        pieces.append(field)
        position = match.end()
    pieces.append(template[position:])

    def render(record: ConsumerRecord) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(record) for p in pieces)

    return render


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or ISO-8601 (no zone: UTC) -> milliseconds."""
    if text.lstrip("-").isdigit():
        return int(text)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def run(namespace: argparse.Namespace) -> int:
    args = from_args(ConsumeOptions, namespace)
    parser = args.parser
    try:
        render = formatter(args.format)
    except ValueError as exc:
        parser.error(str(exc))
    timestamp = None
    if args.timestamp is not None:
        try:
            timestamp = parse_timestamp(args.timestamp)
        except ValueError:
            parser.error(f"--timestamp {args.timestamp!r}: not milliseconds or ISO-8601")
    if args.offset is not None:
        if args.partition is None:
            parser.error("--offset needs --partition")
        if args.offset not in ("beginning", "end") and not args.offset.isdigit():
            parser.error(f"--offset {args.offset!r}: expected beginning, end or a number")
    if args.group and (args.partition is not None or args.offset or timestamp is not None):
        parser.error("--group cannot be combined with --partition, --offset or --timestamp")
    config = client_properties(namespace)
    try:
        with AdminClient(config) as admin:
            start = _start_offsets(admin, args, timestamp)
    except (KafkaError, OSError) as exc:
        return fail(NAME, f"{args.topic}: {exc}")
    if isinstance(start, str):
        return fail(NAME, start)
    config["isolation.level"] = args.isolation
    config["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    if args.group:
        config["group.id"] = args.group
    try:
        consumer = Consumer(config)
    except KafkaError as exc:
        return fail(NAME, str(exc))
    # SIGINT ends the loop between polls, so a record is never half written or uncounted
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    printed = 0
    code = 0
    try:
        if args.group:
            consumer.subscribe([args.topic])
        else:
            consumer.assign([(args.topic, p, offset) for p, offset in start.items()])
        printed = _print_records(consumer, args, render, interrupted)
    except (KafkaError, OSError) as exc:
        code = fail(NAME, f"{args.topic}: {exc}")
    finally:
        consumer.close(5)
        signal.signal(signal.SIGINT, previous)
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return 130 if interrupted.is_set() else code


def _start_offsets(
    admin: AdminClient, args: ConsumeOptions, timestamp: int | None
) -> dict[int, int] | str:
    """Where each partition starts (-2 beginning, -1 end), or why the topic cannot be read."""
    topic = admin.describe_topics([args.topic]).get(args.topic)
    if topic is None or topic.error_code != 0:
        return f"topic {args.topic!r} does not exist"
    partitions = sorted(p.partition for p in topic.partitions)
    if args.partition is not None:
        if args.partition not in partitions:
            return f"topic {args.topic!r} has no partition {args.partition}"
        partitions = [args.partition]
    if timestamp is not None:
        spec = OffsetSpec.for_timestamp(timestamp)
        results = admin.list_offsets({TopicPartition(args.topic, p): spec for p in partitions})
        return {tp.partition: (r.offset if r.offset >= 0 else -1) for tp, r in results.items()}
    if args.offset is not None:
        offset = {"beginning": -2, "end": -1}.get(args.offset)
        return dict.fromkeys(partitions, int(args.offset) if offset is None else offset)
    return dict.fromkeys(partitions, -2 if args.from_beginning else -1)


def _print_records(
    consumer: Consumer, args: ConsumeOptions, render: Render, interrupted: threading.Event
) -> int:
    """Write records until the limit, the idle timeout or an interrupt; returns how many."""
    out = sys.stdout.buffer
    limit = args.max_messages
    idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    last = time.monotonic()
    printed = 0
    while (limit is None or printed < limit) and not interrupted.is_set():
        records = consumer.poll(0.2, max_records=None if limit is None else limit - printed)
        if not records:
            if not consumer.assignment():  # still joining the group: not idle yet
                last = time.monotonic()
            elif idle_s is not None and time.monotonic() - last >= idle_s:
                break
            continue
        last = time.monotonic()
        out.write(b"".join(render(r) for r in records))
        out.flush()
        printed += len(records)
    return printed
