"""`onceflow topics create|list|describe|alter|delete|delete-records`: topic administration.

Modelled on Kafka's `kafka-topics.sh`: `--bootstrap-server`, `--topic`, `--partitions`,
`--replication-factor`, `--config k=v` (repeatable). `delete-records` is Kafka's
`kafka-delete-records.sh`: `--offset-json-file` with `{"partitions": [{"topic": .., "partition":
.., "offset": ..}], "version": 1}` (offset -1: the high watermark), or `--topic`, `--partition`
(repeatable) and `--offset` for the common case; it prints Kafka's report, one line per
partition with its new low watermark or its error. A failure prints one line naming the topic
and Kafka's error code to stderr and exits 1; bad usage exits 2 (argparse).

`describe --metrics-url http://HOST:PORT/metrics` (the broker's `onceflow.metrics.listener`)
also prints, for each compacted partition, `DirtyRatio` (the log cleaner's dirty ratio) and
`LastCleaned` (when a cleaning round last finished on it, UTC, or `never`): the Kafka protocol
has no request that carries them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass

from onceflow.cli.namespace import Subparsers
from onceflow.cli.options import (
    Options,
    Run,
    add_action,
    add_command,
    client_properties,
    fail,
    guarded,
)
from onceflow.client.admin import AdminClient, NewTopic, OffsetSpec
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode
from onceflow.scrape import CLEANING, ScrapeError, partition_cleaning, scrape


def add_parser(subparsers: Subparsers) -> None:
    """Register the `topics` sub-command and its actions."""
    actions = add_command(
        subparsers,
        "topics",
        "create, list, describe and delete topics; delete records",
        "Create, list, describe and delete topics, and delete records.",
    )

    create = add_action(actions, "create", "create a topic", run_create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: broker's")
    create.add_argument("--replication-factor", type=int, default=-1, help="default: broker's")
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config override (repeatable), e.g. --config retention.ms=60000",
    )
    create.add_argument("--if-not-exists", action="store_true", help="succeed if it exists")

    listing = add_action(actions, "list", "list topic names", run_list)
    listing.add_argument("--include-internal", action="store_true")

    describe = add_action(actions, "describe", "show partitions, leaders and offsets", run_describe)
    describe.add_argument("--topic", action="append", help="topic (repeatable; default: all)")
    describe.add_argument(
        "--metrics-url",
        help="the broker's metrics endpoint (http://HOST:PORT/metrics, onceflow.metrics.listener):"
        " adds each compacted partition's dirty ratio and last cleaning",
    )

    delete = add_action(actions, "delete", "delete a topic", run_delete)
    delete.add_argument("--topic", required=True, action="append", help="topic (repeatable)")
    delete.add_argument("--if-exists", action="store_true", help="succeed if it does not exist")

    alter = add_action(actions, "alter", "add partitions to a topic", run_alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument(
        "--partitions", type=int, required=True, help="the new total (Kafka only adds partitions)"
    )

    records = add_action(
        actions,
        "delete-records",
        "delete records below an offset (kafka-delete-records.sh)",
        run_delete_records,
    )
    records.add_argument(
        "--offset-json-file",
        metavar="FILE",
        help='{"partitions": [{"topic": "t", "partition": 0, "offset": 10}], "version": 1}',
    )
    records.add_argument("--topic", help="instead of a JSON file: the topic")
    records.add_argument(
        "--partition", type=int, action="append", help="partition (repeatable; default: all)"
    )
    records.add_argument(
        "--offset", type=int, default=-1, help="new log start offset (default -1: high watermark)"
    )


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient({"client.id": "onceflow-topics", **client_properties(args)})


def _guarded(options: type[Options], action: Callable[[AdminClient, Options], int]) -> Run:
    """`action(admin, given)` on an AdminClient; failures become one line and exit 1."""
    return guarded("topics", _admin, options, action, refusals=(ValueError,))


@dataclass(frozen=True)
class CreateOptions:
    topic: str
    partitions: int
    replication_factor: int
    config: list[str]
    if_not_exists: bool


@dataclass(frozen=True)
class ListOptions:
    include_internal: bool


@dataclass(frozen=True)
class DescribeOptions:
    topic: list[str] | None
    metrics_url: str | None


@dataclass(frozen=True)
class DeleteOptions:
    topic: list[str]
    if_exists: bool


@dataclass(frozen=True)
class AlterOptions:
    topic: str
    partitions: int


@dataclass(frozen=True)
class DeleteRecordsOptions:
    offset_json_file: str | None
    topic: str | None
    partition: list[int] | None
    offset: int


def _parse_configs(pairs: list[str]) -> dict[str, str]:
    configs = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"bad --config {pair!r}: expected KEY=VALUE")
        configs[key.strip()] = value.strip()
    return configs


def _create(admin: AdminClient, args: CreateOptions) -> int:
    """`topics create`."""
    topic = NewTopic(
        args.topic, args.partitions, args.replication_factor, _parse_configs(args.config)
    )
    result = admin.create_topics([topic])[args.topic]
    if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    if not result.ok:
        detail = f" ({result.error_message})" if result.error_message else ""
        return fail(
            "topics", f"cannot create topic {args.topic!r}: {result.error_code.name}{detail}"
        )
    print(f'Created topic "{args.topic}".')
    return 0


def _list(admin: AdminClient, args: ListOptions) -> int:
    """`topics list`."""
    for name in admin.list_topics(include_internal=args.include_internal):
        print(name)
    return 0


def _describe(admin: AdminClient, args: DescribeOptions) -> int:
    """`topics describe`: one line per topic, then one per partition with its offsets."""
    descriptions = admin.describe_topics(args.topic)
    failed = [d for d in descriptions.values() if d.error_code != ErrorCode.NONE]
    if failed:
        return fail("topics", "; ".join(f"topic {d.name!r}: {d.error_code.name}" for d in failed))
    specs_latest = {
        TopicPartition(d.name, p.partition): OffsetSpec.latest()
        for d in descriptions.values()
        for p in d.partitions
    }
    latest = admin.list_offsets(specs_latest)
    earliest = admin.list_offsets(dict.fromkeys(specs_latest, OffsetSpec.earliest()))
    cleaning = _cleaning_figures(args.metrics_url) if args.metrics_url else {}
    for name in sorted(descriptions):
        d = descriptions[name]
        print(
            f"Topic: {name}\tPartitionCount: {len(d.partitions)}\tReplicationFactor: "
            f"{len(d.partitions[0].replicas) if d.partitions else 0}"
        )
        for p in d.partitions:
            tp = TopicPartition(name, p.partition)
            print(
                f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
                f"LogStartOffset: {earliest[tp].offset}\tLogEndOffset: {latest[tp].offset}"
                + cleaning.get((name, p.partition), "")
            )
    return 0


def _cleaning_figures(url: str) -> dict[tuple[str, int], str]:
    """`\tDirtyRatio: r\tLastCleaned: when` per compacted partition, from the broker's
    Prometheus text (`onceflow_partition_dirty_ratio`, `..._last_cleaned_timestamp_ms`)."""
    try:
        metrics = scrape(url, only=CLEANING)
    except ScrapeError as exc:
        raise ValueError(str(exc)) from None
    return {
        key: f"\tDirtyRatio: {ratio:.2f}\tLastCleaned: {when}"
        for key, (ratio, when) in partition_cleaning(metrics).items()
    }


def _delete(admin: AdminClient, args: DeleteOptions) -> int:
    """`topics delete`."""
    results = admin.delete_topics(args.topic)
    status = 0
    for name in args.topic:
        result = results.get(name)
        if result is None:
            status = fail("topics", f"no result for topic {name!r} in the DeleteTopics response")
        elif result.ok:
            print(f'Deleted topic "{name}".')
        elif result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
            continue
        else:
            detail = f" ({result.error_message})" if result.error_message else ""
            status = fail(
                "topics", f"cannot delete topic {name!r}: {result.error_code.name}{detail}"
            )
    return status


def _alter(admin: AdminClient, args: AlterOptions) -> int:
    """`topics alter --partitions N`: CreatePartitions to a total of N."""
    result = admin.create_partitions({args.topic: args.partitions}).get(args.topic)
    if result is None:
        return fail(
            "topics", f"no result for topic {args.topic!r} in the CreatePartitions response"
        )
    if not result.ok:
        detail = f" ({result.error_message})" if result.error_message else ""
        return fail(
            "topics", f"cannot alter topic {args.topic!r}: {result.error_code.name}{detail}"
        )
    print(f'Topic "{args.topic}" now has {args.partitions} partitions.')
    return 0


def _offsets_from_json(path: str) -> dict[TopicPartition, int]:
    """Kafka's DeleteRecordsCommand JSON (version 1); duplicate partitions are an error."""
    with open(path, encoding="utf-8") as handle:
        try:
            document = json.load(handle)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON: {exc}") from None
    version = document.get("version", 1) if isinstance(document, dict) else None
    if version != 1:
        raise ValueError(f"{path}: not supported version field value {version}")
    offsets: dict[TopicPartition, int] = {}
    duplicates = []
    for entry in document.get("partitions") or []:
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            offset = int(entry["offset"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: bad partition entry {entry!r}") from None
        if tp in offsets:
            duplicates.append(f"{tp.topic}-{tp.partition}")
        offsets[tp] = offset
    if duplicates:
        raise ValueError(
            f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}"
        )
    if not offsets:
        raise ValueError(f"{path}: no partitions")
    return offsets


def _offsets_from_args(
    admin: AdminClient, topic: str, partitions: list[int] | None, offset: int
) -> dict[TopicPartition, int]:
    if partitions is None:
        description = admin.describe_topics([topic])[topic]
        if description.error_code != ErrorCode.NONE:
            raise ValueError(f"topic {topic!r}: {description.error_code.name}")
        partitions = [p.partition for p in description.partitions]
    return {TopicPartition(topic, p): offset for p in partitions}


def _delete_records(admin: AdminClient, args: DeleteRecordsOptions) -> int:
    """`topics delete-records`: Kafka's kafka-delete-records.sh report."""
    if args.offset_json_file is not None and args.topic is None:
        offsets = _offsets_from_json(args.offset_json_file)
    elif args.topic is not None and args.offset_json_file is None:
        offsets = _offsets_from_args(admin, args.topic, args.partition, args.offset)
    else:
        raise ValueError("give either --offset-json-file or --topic")
    print("Executing records delete operation")
    results = admin.delete_records(offsets)
    print("Records delete operation completed:")
    status = 0
    for tp in offsets:
        result = results[tp]
        name = f"{tp.topic}-{tp.partition}"
        if result.error_code == ErrorCode.NONE:
            print(f"partition: {name}\tlow_watermark: {result.low_watermark}")
        else:
            print(f"partition: {name}\terror: {result.error_code.name}")
            status = 1
    return status


run_create = _guarded(CreateOptions, _create)
run_list = _guarded(ListOptions, _list)
run_describe = _guarded(DescribeOptions, _describe)
run_delete = _guarded(DeleteOptions, _delete)
run_delete_records = _guarded(DeleteRecordsOptions, _delete_records)
run_alter = _guarded(AlterOptions, _alter)
