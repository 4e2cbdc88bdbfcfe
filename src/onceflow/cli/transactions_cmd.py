"""`onceflow transactions list|describe|describe-producers|find-hanging|abort` (KIP-664).

Modelled on Kafka's `kafka-transactions.sh`:

- `list` — ListTransactions: transactional id, coordinator, producer id, state; filters
  `--state` and `--producer-id` (repeatable) and `--duration-filter-ms`.
- `describe --transactional-id ID` — DescribeTransactions: producer id and epoch, state,
  timeout, start time and duration of the open transaction, its partitions.
- `describe-producers --topic T --partition P` — DescribeProducers: the producers with state
  on the partition and the first offset of each one's open transaction.
- `find-hanging (--topic T [--partition P] | --broker-id N) [--max-transaction-timeout MIN]`
  — DescribeProducers on each partition, then ListTransactions / DescribeTransactions for the
  producers with a transaction open longer than the threshold (default 15 minutes): those
  whose coordinator does not have that partition in an unfinished transaction at that epoch
  are hanging; each is printed with its start offset and the coordinator's state.
- `abort --topic T --partition P (--start-offset O | --producer-id --producer-epoch
  --coordinator-epoch)` — ends a hanging transaction: with `--start-offset` the producer whose
  open transaction starts at O is found with DescribeProducers, then an ABORT marker is written
  with WriteTxnMarkers, as Kafka's `Admin.abortTransaction` does. Kafka allows that to clients
  with CLUSTER_ACTION; onceflow accepts it only when the broker runs with
  `onceflow.admin.allow.write.txn.markers=true` and the command connects from loopback (run it
  on the broker's host). Otherwise the broker answers CLUSTER_AUTHORIZATION_FAILED.

Every request goes where Kafka's admin client sends it (through `AdminClient`), so the commands
work on a cluster of several brokers: ListTransactions to every broker, DescribeTransactions to
each id's coordinator, DescribeProducers and WriteTxnMarkers to each partition's leader.

Output is tab-separated with a header line. A failure prints one line to stderr and exits 1;
bad usage exits 2 (argparse).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from onceflow.cli.namespace import Subparsers
from onceflow.cli.options import (
    CommandError,
    Options,
    Run,
    add_action,
    add_command,
    client_properties,
    guarded,
)
from onceflow.client.admin import AdminClient
from onceflow.client.txn_admin import AbortTransactionSpec, ProducerState, TransactionDescription
from onceflow.common import TopicPartition, wall_clock_ms
from onceflow.coordinator.txn.state import TxnState
from onceflow.protocol.errors import ErrorCode

_UNFINISHED = ("Ongoing", "PrepareCommit", "PrepareAbort")


def add_parser(subparsers: Subparsers) -> None:
    """Register the `transactions` sub-command and its actions."""
    actions = add_command(
        subparsers,
        "transactions",
        "list, describe and abort transactions",
        "Inspect transactions and abort hanging ones on a running broker.",
    )

    listing = add_action(actions, "list", "list transactional ids", _guarded(ListOptions, _list))
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        type=_state_name,
        help="Kafka's state name, any case: " + ", ".join(_STATE_NAMES.values()),
    )
    listing.add_argument("--producer-id", type=int, action="append", default=[])
    listing.add_argument("--duration-filter-ms", type=int, default=-1)

    describe = add_action(
        actions, "describe", "describe a transactional id", _guarded(DescribeOptions, _describe)
    )
    describe.add_argument("--transactional-id", required=True)

    producers = add_action(
        actions,
        "describe-producers",
        "producers of a partition",
        _guarded(ProducersOptions, _describe_producers),
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)

    hanging = add_action(
        actions,
        "find-hanging",
        "open transactions that no coordinator will finish (KIP-664)",
        _guarded(HangingOptions, _find_hanging),
    )
    scope = hanging.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", help="look at this topic's partitions")
    scope.add_argument("--broker-id", type=int, help="look at every partition this broker leads")
    hanging.add_argument("--partition", type=int, help="only this partition (with --topic)")
    hanging.add_argument(
        "--max-transaction-timeout",
        type=float,
        default=15,
        metavar="MINUTES",
        help="only transactions open longer than this (default 15, Kafka's "
        "transaction.max.timeout.ms)",
    )

    abort = add_action(
        actions,
        "abort",
        "abort a hanging transaction on a partition",
        _guarded(AbortOptions, _abort),
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="first offset of the open transaction")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)


def _connect(args: argparse.Namespace) -> AdminClient:
    return AdminClient({"client.id": "onceflow-transactions", **client_properties(args)})


def _guarded(options: type[Options], action: Callable[[AdminClient, Options], int]) -> Run:
    """`action(admin, given)` on an admin client; failures become one line and exit 1."""
    return guarded("transactions", _connect, options, action, (CommandError, ValueError))


@dataclass(frozen=True)
class ListOptions:
    state: list[str]
    producer_id: list[int]
    duration_filter_ms: int


@dataclass(frozen=True)
class DescribeOptions:
    transactional_id: str


@dataclass(frozen=True)
class ProducersOptions:
    topic: str
    partition: int


@dataclass(frozen=True)
class HangingOptions:
    topic: str | None
    broker_id: int | None
    partition: int | None
    max_transaction_timeout: float


@dataclass(frozen=True)
class AbortOptions:
    topic: str
    partition: int
    start_offset: int | None
    producer_id: int | None
    producer_epoch: int | None
    coordinator_epoch: int | None


_STATE_NAMES = {state.kafka_name.lower(): state.kafka_name for state in TxnState}


def _state_name(text: str) -> str:
    """`--state`: a transaction state by Kafka's name, case-insensitively (else a usage error)."""
    name = _STATE_NAMES.get(text.lower())
    if name is None:
        raise argparse.ArgumentTypeError(
            f"unknown state {text!r}; one of {', '.join(_STATE_NAMES.values())}"
        )
    return name


def _check(error_code: int, what: str) -> None:
    if error_code != ErrorCode.NONE:
        raise CommandError(f"{what}: {ErrorCode(error_code).name}")


def _print_rows(header: list[str], rows: list[list[object]]) -> None:
    print("\t".join(header))
    for row in rows:
        print("\t".join(str(value) for value in row))


def _list(admin: AdminClient, args: ListOptions) -> int:
    """`transactions list`: ListTransactions on every broker."""
    listed = admin.list_transactions(args.state, args.producer_id, args.duration_filter_ms)
    rows = [[t.transactional_id, t.coordinator_id, t.producer_id, t.state] for t in listed]
    _print_rows(["TransactionalId", "CoordinatorId", "ProducerId", "TransactionState"], rows)
    return 0


def _describe(admin: AdminClient, args: DescribeOptions) -> int:
    """`transactions describe`: DescribeTransactions at the id's coordinator."""
    tid = args.transactional_id
    state = admin.describe_transactions([tid])[tid]
    _check(state.error_code, f"DescribeTransactions for {tid!r}")
    start = state.transaction_start_time_ms
    duration = wall_clock_ms() - start if start >= 0 else -1
    partitions = ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(state.partitions))
    header = [
        "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
        "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
        "TopicPartitions",
    ]  # fmt: skip
    row = [
        state.coordinator_id, tid, state.producer_id, state.producer_epoch, state.state,
        state.transaction_timeout_ms, start, duration, partitions,
    ]  # fmt: skip
    _print_rows(header, [row])
    return 0


def _producers(
    admin: AdminClient, tps: list[TopicPartition]
) -> dict[TopicPartition, tuple[ProducerState, ...]]:
    """DescribeProducers at each partition's leader; the first failing partition is an error."""
    results = admin.describe_producers(tps)
    for tp in tps:
        _check(results[tp].error_code, f"DescribeProducers for {tp.topic}-{tp.partition}")
    return {tp: results[tp].producers for tp in tps}


def _describe_producers(admin: AdminClient, args: ProducersOptions) -> int:
    """`transactions describe-producers`."""
    tp = TopicPartition(args.topic, args.partition)
    header = [
        "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
        "LastTimestamp", "CurrentTransactionStartOffset",
    ]  # fmt: skip
    rows: list[list[object]] = [
        [p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
         p.last_timestamp, p.current_txn_start_offset]
        for p in _producers(admin, [tp])[tp]
    ]  # fmt: skip
    _print_rows(header, rows)
    return 0


def _partitions(admin: AdminClient, args: HangingOptions) -> list[TopicPartition]:
    """The partitions `find-hanging` looks at: a topic's (or one of them), or every
    partition the broker leads."""
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition needs --topic")
    out = []
    for name, topic in admin.describe_topics(None if args.topic is None else [args.topic]).items():
        _check(topic.error_code, f"Metadata for {name!r}")
        for p in topic.partitions:
            if args.topic is None and p.leader != args.broker_id:
                continue
            if args.partition is None or p.partition == args.partition:
                out.append(TopicPartition(name, p.partition))
    if args.partition is not None and not out:
        raise CommandError(f"{args.topic} has no partition {args.partition}")
    return sorted(out)


def _coordinator_view(
    admin: AdminClient, producer_ids: set[int]
) -> dict[int, TransactionDescription]:
    """Producer id -> its transactional id's description, where a coordinator knows one
    (ListTransactions filtered by producer id, then DescribeTransactions)."""
    if not producer_ids:
        return {}
    ids = [t.transactional_id for t in admin.list_transactions(producer_ids=producer_ids)]
    described = admin.describe_transactions(ids).values()
    return {s.producer_id: s for s in described if s.error_code == ErrorCode.NONE}


def _find_hanging(admin: AdminClient, args: HangingOptions) -> int:
    """`transactions find-hanging`: producers with an open transaction on a partition, older
    than the threshold, that their coordinator does not have ongoing with that partition (at
    that epoch): nothing will ever end them but `transactions abort`."""
    now = wall_clock_ms()
    threshold_ms = args.max_transaction_timeout * 60_000
    candidates: list[tuple[TopicPartition, ProducerState]] = [
        (tp, p)
        for tp, producers in _producers(admin, _partitions(admin, args)).items()
        for p in producers
        if p.current_txn_start_offset >= 0 and now - p.last_timestamp >= threshold_ms
    ]
    states = _coordinator_view(admin, {p.producer_id for _, p in candidates})
    header = [
        "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
        "StartOffset", "LastTimestamp", "Duration(min)", "CoordinatorState",
    ]  # fmt: skip
    rows = []
    for tp, p in sorted(candidates, key=lambda c: (c[0], c[1].producer_id)):
        state = states.get(p.producer_id)
        if state is not None and _coordinator_has(state, tp, p.producer_epoch):
            continue  # the coordinator will commit or abort it (or time it out)
        rows.append(
            [tp.topic, tp.partition, p.producer_id, p.producer_epoch, p.coordinator_epoch,
             p.current_txn_start_offset, p.last_timestamp, (now - p.last_timestamp) // 60_000,
             "-" if state is None else state.state]
        )  # fmt: skip
    _print_rows(header, rows)
    return 0


def _coordinator_has(state: TransactionDescription, tp: TopicPartition, epoch: int) -> bool:
    """Whether the coordinator's transaction includes the partition and is not finished (so
    it will write the partition's marker itself). Its epoch is the producer's, or one more
    while it completes (transaction version 2 bumps the epoch at every EndTxn)."""
    if state.state not in _UNFINISHED or tp not in state.partitions:
        return False
    return state.producer_epoch in (epoch, epoch + 1)


def _abort_target(admin: AdminClient, args: AbortOptions) -> AbortTransactionSpec:
    """The transaction to abort: given, or found by its start offset."""
    tp = TopicPartition(args.topic, args.partition)
    explicit = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is None:
        producer_id, producer_epoch, coordinator_epoch = explicit
        if producer_id is None or producer_epoch is None or coordinator_epoch is None:
            raise CommandError(
                "give --start-offset, or all of --producer-id, --producer-epoch and "
                "--coordinator-epoch"
            )
        return AbortTransactionSpec(tp, producer_id, producer_epoch, coordinator_epoch)
    if any(value is not None for value in explicit):
        raise CommandError("--start-offset excludes --producer-id/--producer-epoch/...")
    for p in _producers(admin, [tp])[tp]:
        if p.current_txn_start_offset == args.start_offset:
            return AbortTransactionSpec(
                tp, p.producer_id, p.producer_epoch, max(0, p.coordinator_epoch)
            )
    raise CommandError(
        f"no open transaction starts at offset {args.start_offset} of {args.topic}-{args.partition}"
    )


def _abort(admin: AdminClient, args: AbortOptions) -> int:
    """`transactions abort`: an ABORT marker written by the partition's leader."""
    spec = _abort_target(admin, args)
    where = f"{args.topic}-{args.partition}"
    code = admin.abort_transaction(spec)
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        raise CommandError(
            f"WriteTxnMarkers for {where}: CLUSTER_AUTHORIZATION_FAILED (Kafka wants "
            "CLUSTER_ACTION on the cluster; the onceflow broker accepts an admin abort only "
            "with onceflow.admin.allow.write.txn.markers=true, from a client on its own host)"
        )
    _check(code, f"WriteTxnMarkers for {where}")
    print(
        f"Aborted the transaction of producer {spec.producer_id} "
        f"(epoch {spec.producer_epoch}) on {where}."
    )
    return 0
