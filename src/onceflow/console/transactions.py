"""The transactional ids the coordinators hold (ListTransactions, then DescribeTransactions,
KIP-664), a page at a time, with their age, and which open ones are hanging.

A transaction is counted as hanging when it has been open longer than the threshold: by
default the broker's `transaction.max.timeout.ms` (no transaction may legitimately last
longer, so the coordinator should have aborted it), else the console's `--hanging-after-ms`.
"""

from __future__ import annotations

from dataclasses import dataclass

from onceflow.client.admin import AdminClient
from onceflow.client.config_admin import ConfigResource
from onceflow.console.txn_query import TxnQuery
from onceflow.protocol.errors import ErrorCode

BROKER_RESOURCE = 4
KAFKA_DEFAULT_MAX_TIMEOUT_MS = 900_000  # Kafka's transaction.max.timeout.ms default
# Kafka's TransactionState names of a transaction that is open or being completed
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort"})


@dataclass(frozen=True)
class TransactionRow:
    """One transactional id as its coordinator describes it. `age_ms` is -1 without an open
    transaction; `error` names a DescribeTransactions error."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    age_ms: int
    partitions: list[str]
    hanging: bool
    error: str | None = None

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES


@dataclass(frozen=True)
class TransactionsView:
    """One page of the transactions page: the rows `query` selects on its page (`matched`
    ids pass its filters, in `pages` pages), and counts over every transactional id."""

    hanging_threshold_ms: int
    transactions: list[TransactionRow]
    query: TxnQuery
    matched: int
    pages: int
    total_transactions: int
    open_transactions: int
    hanging_transactions: int


def hanging_threshold_ms(admin: AdminClient, hanging_after_ms: int | None) -> int:
    """`hanging_after_ms` when given, else the first broker's `transaction.max.timeout.ms`
    (Kafka's default when the broker does not say)."""
    if hanging_after_ms is not None:
        return hanging_after_ms
    brokers = admin.describe_cluster()
    if not brokers:
        return KAFKA_DEFAULT_MAX_TIMEOUT_MS
    resource = ConfigResource(BROKER_RESOURCE, str(brokers[0].node_id))
    result = admin.describe_configs([resource]).get(resource)
    entry = (
        None
        if result is None or result.entries is None
        else result.entries.get("transaction.max.timeout.ms")
    )
    if entry is None or entry.value is None:
        return KAFKA_DEFAULT_MAX_TIMEOUT_MS
    return int(entry.value)


def page_transactions(
    admin: AdminClient, now_ms: int, threshold_ms: int, query: TxnQuery
) -> TransactionsView:
    """The page of transactional ids `query` asks for, sorted by id. ListTransactions gives
    every id with its state; only the open ids (for the hanging count) and the page's other
    ids are described: two DescribeTransactions at most, however many ids there are."""
    listed = {t.transactional_id: t.state for t in admin.list_transactions()}
    open_ids = sorted(i for i, state in listed.items() if state in OPEN_STATES)
    rows = _rows(admin, open_ids, now_ms, threshold_ms)
    still_open = [r for r in rows.values() if r.open and r.transaction_start_time_ms >= 0]
    hanging = {r.transactional_id for r in still_open if r.hanging}
    matched = sorted(
        i for i, state in listed.items()
        if i.startswith(query.prefix)
        and (not query.states or state in query.states)
        and (not query.hanging or i in hanging)
    )  # fmt: skip
    first = (query.page - 1) * query.limit
    shown = matched[first : first + query.limit]
    rows.update(_rows(admin, [i for i in shown if i not in rows], now_ms, threshold_ms))
    return TransactionsView(
        threshold_ms, [rows[i] for i in shown if i in rows], query, matched=len(matched),
        pages=max(1, -(-len(matched) // query.limit)), total_transactions=len(listed),
        open_transactions=len(still_open), hanging_transactions=len(hanging),
    )  # fmt: skip


def _rows(
    admin: AdminClient, ids: list[str], now_ms: int, threshold_ms: int
) -> dict[str, TransactionRow]:
    """`ids` described (one DescribeTransactions; none for no ids); an id gone since it was
    listed is left out."""
    if not ids:
        return {}
    described = admin.describe_transactions(ids)
    rows = {}
    for transactional_id in ids:
        d = described.get(transactional_id)
        if d is None:
            continue
        error = None if d.error_code == ErrorCode.NONE else ErrorCode(d.error_code).name
        start = d.transaction_start_time_ms
        is_open = d.state in OPEN_STATES and start >= 0
        age = now_ms - start if is_open else -1
        rows[transactional_id] = TransactionRow(
            transactional_id, d.state, d.producer_id, d.producer_epoch,
            d.transaction_timeout_ms, start, age,
            sorted(f"{tp.topic}-{tp.partition}" for tp in d.partitions),
            hanging=is_open and age > threshold_ms, error=error,
        )  # fmt: skip
    return rows
