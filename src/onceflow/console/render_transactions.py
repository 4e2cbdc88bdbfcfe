"""HTML for the transactions page: the counts over every transactional id, a form with the
filters (state, hanging, id prefix, rows per page), one page of rows, and links to the
previous and next page that keep the filters (the page's polling keeps them too: it
re-fetches its own URL)."""

from __future__ import annotations

from dataclasses import replace
from html import escape

from onceflow.console.render import Html, abort_href, link, table, warn
from onceflow.console.transactions import TransactionRow, TransactionsView
from onceflow.console.txn_query import STATES, TxnQuery, txn_query_string

HEADERS = ["transactional id", "state", "producer id", "epoch", "partitions", "age (ms)",
           "timeout (ms)", "hanging", "error", "action"]  # fmt: skip


def _abort_links(row: TransactionRow) -> Html:
    """An abort link per partition of a hanging transaction."""
    links = [
        link(abort_href(topic, int(partition), row.producer_id), f"abort on {topic}-{partition}")
        for topic, _, partition in (tp.rpartition("-") for tp in row.partitions)
    ]
    return Html(" ".join(links))


def _filter_form(q: TxnQuery) -> str:
    options = "".join(
        f"<option{' selected' if s in q.states else ''}>{escape(s)}</option>" for s in STATES
    )
    return (
        '<form method="get" action="/transactions">'
        f'<label>state <select name="state" multiple size="3">{options}</select></label> '
        f'<label>id prefix <input name="prefix" value="{escape(q.prefix)}"></label> '
        f'<label><input type="checkbox" name="hanging" value="1"{" checked" if q.hanging else ""}>'
        f' only hanging</label> <label>rows per page <input name="limit" type="number" min="1" '
        f'value="{q.limit}" size="5"></label> <button>Show</button></form>'
    )


def _pager(view: TransactionsView) -> str:
    q = view.query
    first = (q.page - 1) * q.limit
    where = (
        f"rows {first + 1}-{first + len(view.transactions)} of {view.matched}"
        if view.transactions
        else f"no rows on page {q.page} ({view.matched} match)"
    )
    prev = link("/transactions" + txn_query_string(q, q.page - 1), "previous page")
    after = link("/transactions" + txn_query_string(q, q.page + 1), "next page")
    return (
        f'<p class="pager">Page {q.page} of {view.pages}: {where}.'
        + (f" {prev}" if q.page > 1 else "")
        + (f" {after}" if q.page < view.pages else "")
        + "</p>"
    )


def transactions_main(view: TransactionsView, actions: bool = False) -> str:
    """The transactions page; with `actions`, abort links for the hanging ones."""
    hanging = view.hanging_transactions
    counts = table(
        ["transactional ids", "open transactions", "hanging transactions"],
        [[view.total_transactions, view.open_transactions,
          warn(str(hanging)) if hanging else hanging]],
    )  # fmt: skip
    cells = [
        [r.transactional_id, r.state, r.producer_id, r.producer_epoch, ", ".join(r.partitions),
         "" if r.age_ms < 0 else r.age_ms, r.transaction_timeout_ms,
         warn("hanging") if r.hanging else "", r.error,
         _abort_links(r) if actions and r.hanging else ""]
        for r in view.transactions
    ]  # fmt: skip
    flipped = replace(view.query, hanging=not view.query.hanging, page=1)  # other filters kept
    toggle = link(
        "/transactions" + txn_query_string(flipped),
        "all" if view.query.hanging else "only hanging",
    )
    return (
        f"<h1>Transactions</h1>{counts}<p>Show {toggle}. Hanging: open longer than "
        f"{view.hanging_threshold_ms} ms.</p>{_filter_form(view.query)}{_pager(view)}"
        + table(HEADERS, cells)
        + _pager(view)
    )
