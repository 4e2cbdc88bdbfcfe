"""The console's "reset offsets" action for a consumer group and one topic, shaped like Kafka's
`kafka-consumer-groups --reset-offsets --topic T`: `to-earliest` (the log start offset),
`to-latest` (the high watermark), `to-offset N` (kept within those two, as Kafka does) and
`to-datetime` (the first record at or after the time; the high watermark when there is none).

`plan_reset` is the dry run: the current and the new offset of every partition of the topic.
`execute_reset` computes the plan afresh and commits it. Both refuse a group with active
members (Kafka allows a reset only while the group is Empty, or Dead: it does not exist yet).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.common import TopicPartition
from onceflow.console.errors import BadInput
from onceflow.console.offsets import partition_offsets
from onceflow.console.topics import UnknownTopic
from onceflow.protocol.errors import ErrorCode

STRATEGIES = ("to-earliest", "to-latest", "to-offset", "to-datetime")
RESETTABLE_STATES = frozenset({"Empty", "Dead"})


class BadReset(BadInput):
    """A reset that cannot be planned; the message says why, for the person who asked."""


@dataclass(frozen=True)
class ResetRequest:
    """`value` is the offset for to-offset, the ISO 8601 time for to-datetime (UTC unless it
    names a zone), empty otherwise."""

    group_id: str
    topic: str
    strategy: str
    value: str = ""


@dataclass(frozen=True)
class ResetRow:
    topic: str
    partition: int
    current_offset: int | None  # None: nothing committed
    new_offset: int


@dataclass(frozen=True)
class ResetPlan:
    request: ResetRequest
    group_state: str
    rows: list[ResetRow]


def parse_reset_request(group_id: str, form: dict[str, str]) -> ResetRequest:
    """The reset a submitted form asks for; `BadReset` for a missing or malformed field."""
    topic = form.get("topic", "").strip()
    strategy = form.get("strategy", "")
    value = form.get("value", "").strip()
    if not topic:
        raise BadReset("Name the topic whose offsets to reset.")
    if strategy not in STRATEGIES:
        raise BadReset(f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}.")
    if strategy == "to-offset":
        _offset(value)
    if strategy == "to-datetime":
        _timestamp_ms(value)
    return ResetRequest(group_id, topic, strategy, value)


def _offset(value: str) -> int:
    try:
        offset = int(value)
    except ValueError:
        raise BadReset(f"to-offset needs a whole number, not {value!r}.") from None
    if offset < 0:
        raise BadReset(f"to-offset {offset} is negative.")
    return offset


def _timestamp_ms(value: str) -> int:
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise BadReset(
            f"to-datetime needs an ISO 8601 time such as 2026-01-31T12:00:00, not {value!r}."
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ms = int(when.timestamp() * 1000)
    if ms < 0:
        raise BadReset(f"to-datetime {value!r} is before 1970.")
    return ms


def plan_reset(admin: AdminClient, request: ResetRequest) -> ResetPlan:
    """The dry run: every partition of the topic with its committed and its new offset."""
    described = admin.describe_groups([request.group_id]).get(request.group_id)
    state = "Dead" if described is None else described.state
    if state not in RESETTABLE_STATES:
        raise BadReset(
            f"Offsets can only be reset while group {request.group_id!r} is inactive (Empty); "
            f"it is {state}."
        )
    topic = admin.describe_topics([request.topic]).get(request.topic)
    if topic is None or topic.error_code != ErrorCode.NONE:
        raise UnknownTopic(request.topic)
    tps = [TopicPartition(request.topic, p.partition) for p in topic.partitions]
    tps.sort(key=lambda tp: tp.partition)
    committed = admin.list_consumer_group_offsets(request.group_id, tps, require_stable=False)
    new = _new_offsets(admin, request, tps)
    rows = []
    for tp in tps:
        current = committed.get(tp)
        rows.append(ResetRow(tp.topic, tp.partition, None if current is None else current[0],
                             new[tp]))  # fmt: skip
    return ResetPlan(request, state, rows)


def _new_offsets(
    admin: AdminClient, request: ResetRequest, tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    offsets = partition_offsets(admin, tps)
    errors = [f"{tp.topic}-{tp.partition}: {o.error}" for tp, o in offsets.items() if o.error]
    if errors:
        raise BadReset("ListOffsets failed for " + "; ".join(errors))
    if request.strategy == "to-earliest":
        return {tp: offsets[tp].log_start_offset for tp in tps}
    if request.strategy == "to-latest":
        return {tp: offsets[tp].high_watermark for tp in tps}
    if request.strategy == "to-offset":
        wanted = _offset(request.value)
        return {
            tp: min(max(wanted, offsets[tp].log_start_offset), offsets[tp].high_watermark)
            for tp in tps
        }
    at = OffsetSpec.for_timestamp(_timestamp_ms(request.value))
    found = admin.list_offsets(dict.fromkeys(tps, at))
    return {
        tp: offsets[tp].high_watermark if found[tp].offset < 0 else found[tp].offset for tp in tps
    }


def execute_reset(admin: AdminClient, request: ResetRequest) -> tuple[ResetPlan, dict[str, str]]:
    """Plan again and commit the new offsets; the plan and the error per partition that was
    not stored (`topic-partition` -> error name; empty when all were)."""
    plan = plan_reset(admin, request)
    offsets = {TopicPartition(r.topic, r.partition): (r.new_offset, "") for r in plan.rows}
    results = admin.alter_consumer_group_offsets(request.group_id, offsets)
    errors = {
        f"{tp.topic}-{tp.partition}": ErrorCode(code).name
        for tp, code in sorted(results.items())
        if code != ErrorCode.NONE
    }
    return plan, errors
