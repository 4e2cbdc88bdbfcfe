"""The topic page's message browser: up to `limit` records of one partition from an offset or a
timestamp, read as a read_committed or a read_uncommitted consumer would, with key, value and
headers shown as text, JSON or hex.

A timestamp is turned into an offset with ListOffsets (the first record at or after it, as
Kafka's `offsetsForTimes`); reading stops at the last stable offset (read_committed) or the
high watermark (read_uncommitted), so a browse never waits for records that are not there.
Only the first `MAX_SHOWN_BYTES` of a key, value or header are shown; the size says how big it
was. Input the browser cannot use raises `BadBrowse` with a sentence for the page.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.client.consumer import Consumer
from onceflow.common import TopicPartition
from onceflow.console.errors import BadInput
from onceflow.console.offsets import PartitionOffsets, partition_offsets
from onceflow.console.topics import UnknownTopic
from onceflow.protocol.errors import ErrorCode

ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
FORMATS = ("text", "json", "hex")
DEFAULT_LIMIT = 20
MAX_LIMIT = 500
MAX_SHOWN_BYTES = 4096
READ_TIMEOUT_S = 10.0


class BadBrowse(BadInput):
    """A browse the page cannot run; the message says why, for the person who asked."""


@dataclass(frozen=True)
class BrowseQuery:
    """What to read: exactly one of `offset` and `timestamp_ms` is set."""

    topic: str
    partition: int
    isolation_level: str
    offset: int | None
    timestamp_ms: int | None
    limit: int
    fmt: str


@dataclass(frozen=True)
class ShownBytes:
    """A key, value or header as shown: `text` None for a null; `shown_as` the format used
    (text falls back to hex when the bytes are not UTF-8, json to text when they do not
    parse); `size` the full size in bytes, of which only the first MAX_SHOWN_BYTES show."""

    text: str | None
    shown_as: str
    size: int
    truncated: bool


@dataclass(frozen=True)
class MessageRow:
    offset: int
    timestamp: int
    key: ShownBytes
    value: ShownBytes
    headers: list[tuple[str, ShownBytes]]


@dataclass(frozen=True)
class BrowseView:
    """The records read from `start_offset` up to `end_offset` (exclusive: the LSO or the high
    watermark, by isolation level), at most `query.limit` of them."""

    query: BrowseQuery
    offsets: PartitionOffsets
    start_offset: int
    end_offset: int
    messages: list[MessageRow]


def _int_param(params: Mapping[str, str], name: str) -> int | None:
    raw = params.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadBrowse(f"{name} {raw!r} is not a whole number.") from None


def parse_browse_query(topic: str, params: Mapping[str, str]) -> BrowseQuery:
    """The browse the query string asks for; `BadBrowse` for anything out of range."""
    partition = _int_param(params, "partition") or 0
    offset = _int_param(params, "offset")
    timestamp = _int_param(params, "timestamp")
    limit = _int_param(params, "limit")
    limit = DEFAULT_LIMIT if limit is None else limit
    isolation = params.get("isolation", ISOLATION_LEVELS[0])
    fmt = params.get("format", FORMATS[0])
    if partition < 0:
        raise BadBrowse(f"partition {partition} is negative.")
    if offset is not None and timestamp is not None:
        raise BadBrowse("Give an offset or a timestamp, not both.")
    if offset is not None and offset < 0:
        raise BadBrowse(f"offset {offset} is negative.")
    if timestamp is not None and timestamp < 0:
        raise BadBrowse(f"timestamp {timestamp} is negative (milliseconds since the epoch).")
    if not 1 <= limit <= MAX_LIMIT:
        raise BadBrowse(f"limit {limit} is outside 1..{MAX_LIMIT}.")
    if isolation not in ISOLATION_LEVELS:
        raise BadBrowse(f"isolation {isolation!r} is not one of {', '.join(ISOLATION_LEVELS)}.")
    if fmt not in FORMATS:
        raise BadBrowse(f"format {fmt!r} is not one of {', '.join(FORMATS)}.")
    return BrowseQuery(topic, partition, isolation, offset, timestamp, limit, fmt)


def show_bytes(data: bytes | None, fmt: str) -> ShownBytes:
    """`data` as the page shows it in format `fmt` (see `ShownBytes`)."""
    if data is None:
        return ShownBytes(None, fmt, 0, False)
    head, truncated = data[:MAX_SHOWN_BYTES], len(data) > MAX_SHOWN_BYTES
    if fmt == "json" and not truncated:
        try:
            parsed = json.loads(data)
        except ValueError:  # not UTF-8 or not JSON: shown as text (or hex) instead
            pass
        else:
            return ShownBytes(json.dumps(parsed, indent=2, ensure_ascii=False), "json", len(data),
                              False)  # fmt: skip
    if fmt != "hex":
        try:
            # a cut may split a multi-byte character: drop its start, keep the rest as text
            text = head.decode("utf-8", errors="ignore" if truncated else "strict")
            return ShownBytes(text, "text", len(data), truncated)
        except UnicodeDecodeError:
            pass
    return ShownBytes(head.hex(" "), "hex", len(data), truncated)


def _start_offset(admin: AdminClient, query: BrowseQuery, offsets: PartitionOffsets) -> int:
    tp = TopicPartition(query.topic, query.partition)
    if query.timestamp_ms is not None:
        found = admin.list_offsets({tp: OffsetSpec.for_timestamp(query.timestamp_ms)})[tp]
        if found.error_code != ErrorCode.NONE:
            raise BadBrowse(f"ListOffsets for the timestamp: {ErrorCode(found.error_code).name}")
        return offsets.high_watermark if found.offset < 0 else found.offset
    if query.offset is None:
        return offsets.log_start_offset
    if not offsets.log_start_offset <= query.offset <= offsets.high_watermark:
        raise BadBrowse(
            f"offset {query.offset} is outside partition {query.partition}'s offsets "
            f"{offsets.log_start_offset}..{offsets.high_watermark} (log start offset to high "
            "watermark)."
        )
    return query.offset


def browse(
    admin: AdminClient,
    config: Mapping[str, Any],
    query: BrowseQuery,
    unlocked: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
) -> BrowseView:
    """Read the records `query` asks for with a consumer built from the console's client
    `config` (no group: nothing is committed). The reading runs inside `unlocked()`
    (`ClusterView.unlocked`: other pages need not wait for it)."""
    description = admin.describe_topics([query.topic]).get(query.topic)
    if description is None or description.error_code != ErrorCode.NONE:
        raise UnknownTopic(query.topic)
    count = len(description.partitions)
    if query.partition >= count:
        raise BadBrowse(f"Topic {query.topic!r} has {count} partition(s): 0..{count - 1}.")
    tp = TopicPartition(query.topic, query.partition)
    offsets = partition_offsets(admin, [tp])[tp]
    if offsets.error is not None:
        raise BadBrowse(f"ListOffsets for {tp.topic}-{tp.partition}: {offsets.error}")
    start = _start_offset(admin, query, offsets)
    committed = query.isolation_level == "read_committed"
    end = offsets.last_stable_offset if committed else offsets.high_watermark
    with unlocked():
        records = _read(config, tp, query, start, end) if start < end else []
    messages = [
        MessageRow(
            r.offset, r.timestamp, show_bytes(r.key, query.fmt), show_bytes(r.value, query.fmt),
            [(name, show_bytes(value, query.fmt)) for name, value in r.headers],
        )
        for r in records
    ]  # fmt: skip
    return BrowseView(query, offsets, start, end, messages)


def _read(
    config: Mapping[str, Any], tp: TopicPartition, query: BrowseQuery, start: int, end: int
) -> list[Any]:
    consumer = Consumer(
        {
            **config,
            "group.id": None,
            "enable.auto.commit": False,
            "isolation.level": query.isolation_level,
            "client.id": "onceflow-console-browser",
        }
    )
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        out: list[Any] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(out) < query.limit and time.monotonic() < deadline:
            batch = consumer.poll(timeout=0.5, max_records=query.limit - len(out))
            out.extend(r for r in batch if r.offset < end)
            if consumer.position(tp) >= end:
                break
        return out[: query.limit]
    finally:
        consumer.close(timeout=2)
