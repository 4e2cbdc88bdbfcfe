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

Output is tab-separated with a header line. A failure prints one line to stderr and exits 1;
bad usage exits 2 (argparse).
"""

from __future__ import annotations

import argparse
import sys

from onceflow.cli.options import (
    CommandError,
    add_action,
    add_command,
    client_properties,
    guarded,
)
from onceflow.client.connection import BrokerConnection
from onceflow.client.net.security import client_security
from onceflow.common import wall_clock_ms
from onceflow.coordinator.txn.state import TxnState
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.describe_producers import DescribeProducersRequest
from onceflow.protocol.messages.describe_transactions import DescribeTransactionsRequest
from onceflow.protocol.messages.find_coordinator import FindCoordinatorRequest
from onceflow.protocol.messages.list_transactions import ListTransactionsRequest
from onceflow.protocol.messages.metadata import MetadataRequest
from onceflow.protocol.messages.write_txn_markers import WriteTxnMarkersRequest

_TRANSACTION_KEY = 1
_FIND_COORDINATOR_VERSION = 3


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the `transactions` sub-command and its actions."""
    actions = add_command(
        subparsers,
        "transactions",
        "list, describe and abort transactions",
        "Inspect transactions and abort hanging ones on a running broker.",
    )

    listing = add_action(actions, "list", "list transactional ids", _guarded(_list))
    listing.add_argument(
        "--state",
        action="append",
        default=[],
        type=_state_name,
        help="Kafka's state name, any case: " + ", ".join(_STATE_NAMES.values()),
    )
    listing.add_argument("--producer-id", type=int, action="append", default=[])
    listing.add_argument("--duration-filter-ms", type=int, default=-1)

    describe = add_action(actions, "describe", "describe a transactional id", _guarded(_describe))
    describe.add_argument("--transactional-id", required=True)

    producers = add_action(
        actions, "describe-producers", "producers of a partition", _guarded(_describe_producers)
    )
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)

    hanging = add_action(
        actions,
        "find-hanging",
        "open transactions that no coordinator will finish (KIP-664)",
        _guarded(_find_hanging),
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
        actions, "abort", "abort a hanging transaction on a partition", _guarded(_abort)
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="first offset of the open transaction")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)


def _connect(args: argparse.Namespace) -> BrokerConnection:
    config = client_properties(args)  # first: it fills in the connection options of `args`
    return BrokerConnection.from_address(
        args.bootstrap_server,
        client_id="onceflow-transactions",
        request_timeout_ms=args.request_timeout_ms,
        security=client_security(config),
    )


def _guarded(action):
    """`action(connection, args)` on a connection; failures become one line and exit 1."""
    return guarded("transactions", _connect, action)


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


def _coordinator_id(conn: BrokerConnection, transactional_id: str) -> int:
    """FindCoordinator(TRANSACTION): the coordinator's node id (it also loads it)."""
    request = FindCoordinatorRequest(key=transactional_id, key_type=_TRANSACTION_KEY)
    response = conn.send(request, version=_FIND_COORDINATOR_VERSION)  # single-key form
    _check(response.error_code, f"FindCoordinator for {transactional_id!r}")
    return response.node_id


def _list(conn: BrokerConnection, args: argparse.Namespace) -> int:
    """`transactions list`."""
    request = ListTransactionsRequest(
        state_filters=args.state,
        producer_id_filters=args.producer_id,
        duration_filter=args.duration_filter_ms,
    )
    response = conn.send(request)
    _check(response.error_code, "ListTransactions")
    if response.unknown_state_filters:
        print(
            f"unknown states ignored: {', '.join(response.unknown_state_filters)}", file=sys.stderr
        )
    rows = [
        [t.transactional_id, conn.host + ":" + str(conn.port), t.producer_id, t.transaction_state]
        for t in response.transaction_states
    ]
    _print_rows(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)
    return 0


def _describe(conn: BrokerConnection, args: argparse.Namespace) -> int:
    """`transactions describe`."""
    tid = args.transactional_id
    coordinator = _coordinator_id(conn, tid)
    response = conn.send(DescribeTransactionsRequest(transactional_ids=[tid]))
    (state,) = response.transaction_states
    _check(state.error_code, f"DescribeTransactions for {tid!r}")
    start = state.transaction_start_time_ms
    duration = wall_clock_ms() - start if start >= 0 else -1
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in sorted(t.partitions))
    header = [
        "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
        "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
        "TopicPartitions",
    ]  # fmt: skip
    row = [
        coordinator, tid, state.producer_id, state.producer_epoch, state.transaction_state,
        state.transaction_timeout_ms, start, duration, partitions,
    ]  # fmt: skip
    _print_rows(header, [row])
    return 0


def _producers(conn: BrokerConnection, topic: str, partition: int) -> list:
    topic_request = DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])
    response = conn.send(DescribeProducersRequest(topics=[topic_request]))
    (result,) = [p for t in response.topics for p in t.partitions]
    _check(result.error_code, f"DescribeProducers for {topic}-{partition}")
    return result.active_producers


def _describe_producers(conn: BrokerConnection, args: argparse.Namespace) -> int:
    """`transactions describe-producers`."""
    header = [
        "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
        "LastTimestamp", "CurrentTransactionStartOffset",
    ]  # fmt: skip
    rows = [
        [p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
         p.last_timestamp, p.current_txn_start_offset]
        for p in _producers(conn, args.topic, args.partition)
    ]  # fmt: skip
    _print_rows(header, rows)
    return 0


def _partitions(conn: BrokerConnection, args: argparse.Namespace) -> list[tuple[str, int]]:
    """The partitions `find-hanging` looks at: a topic's (or one of them), or every
    partition the broker leads."""
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition needs --topic")
    topics = None if args.topic is None else [MetadataRequest.MetadataRequestTopic(name=args.topic)]
    response = conn.send(MetadataRequest(topics=topics, allow_auto_topic_creation=False))
    out = []
    for topic in response.topics:
        _check(topic.error_code, f"Metadata for {topic.name!r}")
        for p in topic.partitions:
            if args.topic is None and p.leader_id != args.broker_id:
                continue
            if args.partition is None or p.partition_index == args.partition:
                out.append((topic.name, p.partition_index))
    if args.partition is not None and not out:
        raise CommandError(f"{args.topic} has no partition {args.partition}")
    return sorted(out)


def _coordinator_view(conn: BrokerConnection, producer_ids: set[int]) -> dict[int, object]:
    """Producer id -> its transactional id's DescribeTransactions state, where the
    coordinator knows one (ListTransactions filtered by producer id)."""
    if not producer_ids:
        return {}
    listed = conn.send(ListTransactionsRequest(producer_id_filters=sorted(producer_ids)))
    _check(listed.error_code, "ListTransactions")
    ids = [t.transactional_id for t in listed.transaction_states]
    if not ids:
        return {}
    described = conn.send(DescribeTransactionsRequest(transactional_ids=ids))
    return {s.producer_id: s for s in described.transaction_states if s.error_code == 0}


def _find_hanging(conn: BrokerConnection, args: argparse.Namespace) -> int:
    """`transactions find-hanging`: producers with an open transaction on a partition, older
    than the threshold, that their coordinator does not have ongoing with that partition (at
    that epoch): nothing will ever end them but `transactions abort`."""
    now = wall_clock_ms()
    threshold_ms = args.max_transaction_timeout * 60_000
    candidates = []
    for topic, partition in _partitions(conn, args):
        for p in _producers(conn, topic, partition):
            if p.current_txn_start_offset >= 0 and now - p.last_timestamp >= threshold_ms:
                candidates.append((topic, partition, p))
    states = _coordinator_view(conn, {p.producer_id for _, _, p in candidates})
    header = [
        "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
        "StartOffset", "LastTimestamp", "Duration(min)", "CoordinatorState",
    ]  # fmt: skip
    rows = []
    for topic, partition, p in candidates:
        state = states.get(p.producer_id)
        if state is not None and _coordinator_has(state, topic, partition, p.producer_epoch):
            continue  # the coordinator will commit or abort it (or time it out)
        rows.append(
            [topic, partition, p.producer_id, p.producer_epoch, p.coordinator_epoch,
             p.current_txn_start_offset, p.last_timestamp, (now - p.last_timestamp) // 60_000,
             "-" if state is None else state.transaction_state]
        )  # fmt: skip
    _print_rows(header, rows)
    return 0


def _coordinator_has(state, topic: str, partition: int, epoch: int) -> bool:
    """Whether the coordinator's transaction includes the partition at this epoch and is not
    finished (so it will write the partition's marker itself)."""
    if state.transaction_state not in ("Ongoing", "PrepareCommit", "PrepareAbort"):
        return False
    in_txn = any(t.topic == topic and partition in t.partitions for t in state.topics)
    return in_txn and state.producer_epoch == epoch


def _abort_target(conn: BrokerConnection, args: argparse.Namespace) -> tuple[int, int, int]:
    """(producer id, producer epoch, coordinator epoch) of the transaction to abort."""
    explicit = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is None:
        if None in explicit:
            raise CommandError(
                "give --start-offset, or all of --producer-id, --producer-epoch and "
                "--coordinator-epoch"
            )
        return explicit
    if any(value is not None for value in explicit):
        raise CommandError("--start-offset excludes --producer-id/--producer-epoch/...")
    for p in _producers(conn, args.topic, args.partition):
        if p.current_txn_start_offset == args.start_offset:
            return p.producer_id, p.producer_epoch, max(0, p.coordinator_epoch)
    raise CommandError(
        f"no open transaction starts at offset {args.start_offset} of {args.topic}-{args.partition}"
    )


def _abort(conn: BrokerConnection, args: argparse.Namespace) -> int:
    """`transactions abort`."""
    producer_id, producer_epoch, coordinator_epoch = _abort_target(conn, args)
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    request = WriteTxnMarkersRequest(
        markers=[
            marker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                transaction_result=False,
                coordinator_epoch=coordinator_epoch,
                topics=[
                    marker.WritableTxnMarkerTopic(
                        name=args.topic, partition_indexes=[args.partition]
                    )
                ],
            )
        ]
    )
    response = conn.send(request)
    (result,) = [p for m in response.markers for t in m.topics for p in t.partitions]
    if result.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        raise CommandError(
            f"WriteTxnMarkers for {args.topic}-{args.partition}: CLUSTER_AUTHORIZATION_FAILED "
            "(the broker accepts an admin abort only with "
            "onceflow.admin.allow.write.txn.markers=true, from a client on its own host)"
        )
    _check(result.error_code, f"WriteTxnMarkers for {args.topic}-{args.partition}")
    print(
        f"Aborted the transaction of producer {producer_id} (epoch {producer_epoch}) on "
        f"{args.topic}-{args.partition}."
    )
    return 0
