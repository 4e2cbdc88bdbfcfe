"""What the transactions page shows: its filters (`state`, `hanging`, `prefix`) and page
(`page`, `limit`), parsed from the query string, and the query string of another page with
the same filters (the next/previous links).

Input the page cannot use raises `BadInput`, which the page shows with status 400.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlencode

from onceflow.console.errors import BadInput

# Kafka's TransactionState names (what ListTransactions and DescribeTransactions report)
STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "Dead", "PrepareEpochFence")  # fmt: skip
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MAX_PREFIX = 249  # Kafka's longest topic name; ids are not bounded, a filter needs no more


@dataclass(frozen=True)
class TxnQuery:
    """Which transactional ids to show: those in one of `states` (all when empty), only the
    hanging ones with `hanging`, ids starting with `prefix`; rows `(page - 1) * limit` on,
    at most `limit`, sorted by id (`page` counts from 1)."""

    states: tuple[str, ...] = ()
    hanging: bool = False
    prefix: str = ""
    page: int = 1
    limit: int = DEFAULT_LIMIT


def _whole_number(params: Mapping[str, str], name: str, default: int, most: int) -> int:
    text = params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadInput(f"{name} {text!r} is not a whole number.") from None
    if not 1 <= value <= most:
        raise BadInput(f"{name} must be from 1 to {most}, not {value}.")
    return value


def parse_txn_query(params: Mapping[str, str], states: Sequence[str]) -> TxnQuery:
    """The query `params` (a request's query string; `states` its `state` values) asks for."""
    for state in states:
        if state not in STATES:
            raise BadInput(f"state {state!r} is not one of Kafka's: {', '.join(STATES)}.")
    hanging = params.get("hanging", "")
    if hanging not in ("", "0", "1"):
        raise BadInput(f"hanging must be 1 or 0, not {hanging!r}.")
    prefix = params.get("prefix", "")
    if len(prefix) > MAX_PREFIX:
        raise BadInput(f"prefix is longer than {MAX_PREFIX} characters.")
    return TxnQuery(
        states=tuple(sorted(set(states))),
        hanging=hanging == "1",
        prefix=prefix,
        page=_whole_number(params, "page", 1, 1_000_000_000),
        limit=_whole_number(params, "limit", DEFAULT_LIMIT, MAX_LIMIT),
    )


def txn_query_string(query: TxnQuery, page: int | None = None) -> str:
    """`?...` for `query` (at `page` when given); the defaults are left out."""
    if page is not None:
        query = replace(query, page=page)
    pairs: list[tuple[str, object]] = [("state", s) for s in query.states]
    if query.hanging:
        pairs.append(("hanging", 1))
    if query.prefix:
        pairs.append(("prefix", query.prefix))
    if query.page != 1:
        pairs.append(("page", query.page))
    if query.limit != DEFAULT_LIMIT:
        pairs.append(("limit", query.limit))
    return "?" + urlencode(pairs) if pairs else ""
