"""`onceflow groups list|describe|delete|reset-offsets`, like kafka-consumer-groups.sh.

`describe --group G` prints, per partition with a committed offset or an assigned member, the
committed offset, the log end and the lag. The log end is the last stable offset (what a
read_committed consumer can reach), so an open transaction never counts as lag. `reset-offsets`
needs a group without active members (as in Kafka) and one of `--to-earliest`, `--to-latest`,
`--to-offset N`, `--to-datetime T` (ISO-8601, no zone means UTC), `--shift-by N`; new offsets
are kept within the log's earliest and latest offsets. It only prints the plan unless given
`--execute` (`--dry-run` is the default). Exit codes: 0 done, 1 broker error or a group that
does not exist or is not empty, 2 bad usage.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from onceflow.cli.namespace import Subparsers, from_args, value
from onceflow.cli.options import add_action, add_command, client_properties, fail
from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.client.errors import KafkaError
from onceflow.client.group_admin import GroupDescription
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode

NAME = "groups"
READ_COMMITTED = 1
Committed = dict[TopicPartition, tuple[int, str] | None]  # what list_consumer_group_offsets returns


@dataclass(frozen=True)
class GroupIds:
    """`--group` of describe and delete (repeatable)."""

    group: list[str]


@dataclass(frozen=True)
class ResetOptions:
    """`groups reset-offsets` (`--dry-run` is the default, so only `--execute` is read)."""

    parser: argparse.ArgumentParser
    group: str
    topic: list[str] | None  # None: --all-topics
    to_earliest: bool
    to_latest: bool
    to_offset: int | None
    to_datetime: str | None
    shift_by: int | None
    execute: bool


def add_parser(subparsers: Subparsers) -> None:
    """Register the `groups` sub-command and its actions."""
    actions = add_command(
        subparsers,
        NAME,
        "list, describe, delete consumer groups and reset their offsets",
        __doc__.split("\n\n", 1)[1],
    )

    listing = add_action(actions, "list", "list group ids", run_list)
    listing.add_argument("--state", action="store_true", help="show each group's state")

    describe = add_action(actions, "describe", "offsets, lag and members of a group", run_describe)
    describe.add_argument("--group", required=True, action="append", help="repeatable")

    delete = add_action(actions, "delete", "delete groups without members", run_delete)
    delete.add_argument("--group", required=True, action="append", help="repeatable")

    reset = add_action(actions, "reset-offsets", "move a group's committed offsets", run_reset)
    reset.add_argument("--group", required=True)
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic", action="append", metavar="TOPIC[:P,...]", help="topic, or some partitions"
    )
    scope.add_argument("--all-topics", action="store_true", help="every topic with offsets")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--to-datetime", metavar="T")
    target.add_argument("--shift-by", type=int, metavar="N")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="print the plan only (default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_properties(args))


def _table(rows: Sequence[Sequence[object]]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        " ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def run_list(args: argparse.Namespace) -> int:
    try:
        with _admin(args) as admin:
            groups = admin.list_groups()
    except (KafkaError, OSError) as exc:
        return fail(NAME, str(exc))
    if value(args, "state", bool):
        if groups:
            print(_table([["GROUP", "STATE"]] + [[g.group_id, g.state] for g in groups]))
    else:
        for g in groups:
            print(g.group_id)
    return 0


def run_describe(args: argparse.Namespace) -> int:
    code = 0
    try:
        with _admin(args) as admin:
            for group_id, group in admin.describe_groups(from_args(GroupIds, args).group).items():
                if _missing(group):
                    code = fail(NAME, f"consumer group '{group_id}' does not exist")
                    continue
                if group.error_code != ErrorCode.NONE:
                    code = fail(NAME, f"group {group_id}: {group.error_code.name}")
                    continue
                print(_describe(admin, group))
    except (KafkaError, OSError) as exc:
        return fail(NAME, str(exc))
    return code


def _missing(group: GroupDescription) -> bool:
    """A group that does not exist: Dead (DescribeGroups v0-5) or GROUP_ID_NOT_FOUND (v6)."""
    return group.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
        group.error_code == ErrorCode.NONE and group.state == "Dead"
    )


def _describe(admin: AdminClient, group: GroupDescription) -> str:
    owners = {tp: m for m in group.members for tp in m.assignment}
    committed = admin.list_consumer_group_offsets(group.group_id, None, require_stable=False)
    partitions = sorted(set(owners) | {tp for tp, c in committed.items() if c is not None})
    ends = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in partitions}, isolation_level=READ_COMMITTED
    )
    header = "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID"
    rows: list[list[object]] = [list(header.split())]
    for tp in partitions:
        current = committed.get(tp)
        end = ends[tp].offset if ends[tp].error_code == ErrorCode.NONE else None
        lag = max(end - current[0], 0) if current is not None and end is not None else "-"
        member = owners.get(tp)
        rows.append(
            [
                group.group_id,
                tp.topic,
                tp.partition,
                "-" if current is None else current[0],
                "-" if end is None else end,
                lag,
                member.member_id if member else "-",
                member.host if member else "-",
                member.client_id if member else "-",
            ]
        )
    state = f"Consumer group '{group.group_id}' ({group.state}, {len(group.members)} members)"
    if len(rows) == 1:
        return state + " has no offsets and no assigned partitions."
    return state + "\n\n" + _table(rows) + "\n"


def run_delete(args: argparse.Namespace) -> int:
    code = 0
    try:
        with _admin(args) as admin:
            results = admin.delete_groups(from_args(GroupIds, args).group)
    except (KafkaError, OSError) as exc:
        return fail(NAME, str(exc))
    for group_id, error in results.items():
        if error == ErrorCode.NONE:
            print(f"Deleted consumer group '{group_id}'.")
        elif error == ErrorCode.GROUP_ID_NOT_FOUND:
            code = fail(NAME, f"consumer group '{group_id}' does not exist")
        elif error == ErrorCode.NON_EMPTY_GROUP:
            code = fail(NAME, f"consumer group '{group_id}' has active members; stop them first")
        else:
            code = fail(NAME, f"consumer group '{group_id}': {error.name}")
    return code


def _parse_datetime(text: str) -> int:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _scope(
    args: ResetOptions, admin: AdminClient, committed: Committed
) -> list[TopicPartition] | str:
    """The partitions to reset, or why the scope is wrong."""
    if args.topic is None:  # --all-topics (argparse requires one of the two)
        return sorted(tp for tp, c in committed.items() if c is not None)
    out: list[TopicPartition] = []
    for item in args.topic:
        topic, _, numbers = item.partition(":")
        described = admin.describe_topics([topic]).get(topic)
        if described is None or described.error_code != ErrorCode.NONE:
            return f"topic '{topic}' does not exist"
        known = {p.partition for p in described.partitions}
        wanted = known
        if numbers:
            try:
                wanted = {int(n) for n in numbers.split(",")}
            except ValueError:
                args.parser.error(f"--topic {item!r}: expected TOPIC or TOPIC:P,P,...")
            if not wanted <= known:
                return f"topic '{topic}' has no partition {sorted(wanted - known)[0]}"
        out += [TopicPartition(topic, p) for p in sorted(wanted)]
    return out


def run_reset(namespace: argparse.Namespace) -> int:
    args = from_args(ResetOptions, namespace)
    timestamp = None
    if args.to_datetime is not None:
        try:
            timestamp = _parse_datetime(args.to_datetime)
        except ValueError:
            args.parser.error(f"--to-datetime {args.to_datetime!r}: not an ISO-8601 date-time")
    try:
        with _admin(namespace) as admin:
            group = admin.describe_groups([args.group])[args.group]
            if not _missing(group) and group.state != "Empty":
                return fail(
                    NAME,
                    f"offsets of group '{args.group}' can only be reset while it has no "
                    f"active members; its state is {group.state}",
                )
            committed = admin.list_consumer_group_offsets(args.group, None, require_stable=False)
            scope = _scope(args, admin, committed)
            if isinstance(scope, str):
                return fail(NAME, scope)
            plan = _plan(args, admin, scope, committed, timestamp)
            rows: list[list[object]] = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
            rows += [[args.group, tp.topic, tp.partition, o] for tp, o in plan.items()]
            print(_table(rows))
            if not args.execute:
                print("(dry run: nothing changed; add --execute to commit these offsets)")
                return 0
            errors = admin.alter_consumer_group_offsets(
                args.group, {tp: (o, "") for tp, o in plan.items()}
            )
    except (KafkaError, OSError) as exc:
        return fail(NAME, str(exc))
    failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE}
    for tp, error in failed.items():
        fail(NAME, f"{tp.topic}-{tp.partition}: {error.name}")
    return 1 if failed else 0


def _plan(
    args: ResetOptions,
    admin: AdminClient,
    scope: list[TopicPartition],
    committed: Committed,
    timestamp: int | None,
) -> dict[TopicPartition, int]:
    """The new offset of each partition, within [earliest, latest] as Kafka keeps it."""
    earliest = admin.list_offsets({tp: OffsetSpec.earliest() for tp in scope})
    latest = admin.list_offsets({tp: OffsetSpec.latest() for tp in scope})
    at_time = {}
    if timestamp is not None:
        at_time = admin.list_offsets({tp: OffsetSpec.for_timestamp(timestamp) for tp in scope})
    plan = {}
    for tp in scope:
        low, high = earliest[tp].offset, latest[tp].offset
        if args.to_earliest:
            target = low
        elif args.to_latest:
            target = high
        elif args.to_offset is not None:
            target = args.to_offset
        elif timestamp is not None:
            target = at_time[tp].offset if at_time[tp].offset >= 0 else high
        elif args.shift_by is not None:
            current = committed.get(tp)
            target = (current[0] if current is not None else low) + args.shift_by
        else:  # argparse requires one of the --to-* options or --shift-by
            raise TypeError("groups reset-offsets: no target option")
        plan[tp] = min(max(target, low), high)
    return plan
