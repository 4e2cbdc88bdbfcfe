"""HTML for the console's pages: plain server-rendered tables, every value escaped.

Each page's content sits in `<main>`; a few lines of inline script re-fetch the page with
`?partial=1` every few seconds and swap the new `<main>` in (an error page's too, so a cluster
going away shows), so numbers stay live without a reload or a JavaScript build.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from urllib.parse import quote, urlencode

from onceflow.common import wall_clock_ms
from onceflow.console.groups import GroupRow
from onceflow.console.markers import QueryProgress
from onceflow.console.overview import Overview
from onceflow.console.throughput import sparkline_svg
from onceflow.console.topics import PartitionRow, TopicView
from onceflow.scrape import utc_text

REFRESH_MS = 3000
Nav = tuple[tuple[str, str], ...]  # (href, text) of each link in the navigation
NAV: Nav = (("/", "Overview"), ("/transactions", "Transactions"), ("/groups", "Groups"),
            ("/spark", "Spark"))  # fmt: skip
STYLE = (
    "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}th{background:#eee}"
    ".warn{color:#b00;font-weight:bold}nav a{margin-right:1em}form label{margin-right:1em}"
    "pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;max-width:48em}"
    ".sparkline{background:#f4f6fa;border:1px solid #ccc;vertical-align:middle}"
)
POLL = (
    "<script>setInterval(async()=>{const u=new URL(location.href);"
    "u.searchParams.set('partial','1');try{const r=await fetch(u);"
    "document.querySelector('main').innerHTML=await r.text();}catch(e){}},"
    f"{REFRESH_MS});</script>"
)


class Html(str):
    """Markup already escaped: `table` puts it in as it is."""


def link(href: str, text: str) -> Html:
    return Html(f'<a href="{escape(href)}">{escape(text)}</a>')


def warn(text: str) -> Html:
    return Html(f'<span class="warn">{escape(text)}</span>')


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(value: object) -> str:
    if isinstance(value, Html):
        return value
    return escape("" if value is None else str(value))


def page(title: str, main: str, poll: bool = True, nav: Nav = NAV) -> str:
    """A whole page: navigation (`nav`), the content and, unless it holds a form (`poll`
    False), the polling script."""
    links = "".join(str(link(href, text)) for href, text in nav)
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{escape(title)} · onceflow"
        f"</title><style>{STYLE}</style></head><body><nav>{links}</nav><main>{main}</main>"
        f"{POLL if poll else ''}</body></html>"
    )


def error_main(title: str, message: str) -> str:
    return f"<h1>{escape(title)}</h1><p>{escape(message)}</p>"


def topic_href(topic: str) -> str:
    return f"/topics/{quote(topic, safe='')}"


def abort_href(topic: str, partition: int, producer_id: int) -> str:
    """The confirmation page of aborting `producer_id`'s open transaction on a partition."""
    query = urlencode({"topic": topic, "partition": partition, "producer_id": producer_id})
    return f"/actions/abort?{query}"


def reset_href(group_id: str) -> str:
    return f"/groups/{quote(group_id, safe='')}/reset"


def messages_href(topic: str) -> str:
    return f"{topic_href(topic)}/messages"


def overview_main(o: Overview, panels: str = "") -> str:
    """The overview; `panels` (markup, e.g. the broker metrics) go under the sparkline."""
    hanging = o.hanging_transactions
    facts = table(
        ["brokers", "topics", "partitions", "open transactions", "hanging transactions"],
        [[len(o.brokers), o.topic_count, o.partition_count, o.open_transactions,
          warn(str(hanging)) if hanging else hanging]],
    )  # fmt: skip
    return (
        f"<h1>Overview</h1>{facts}"
        f"<p>Hanging: open longer than {o.hanging_threshold_ms} ms.</p>"
        f"{sparkline_svg(o.throughput)}{panels}"
        "<h2>Brokers</h2>"
        + table(["node id", "host", "port"], [[b.node_id, b.host, b.port] for b in o.brokers])
        + "<h2>Consumer groups</h2>"
        + table(
            ["group", "state", "members", "total lag"],
            [[g.group_id, g.state, g.members, g.total_lag] for g in o.groups],
        )
        + "<h2>Topics</h2>"
        + table(
            ["topic", "partitions"],
            [[link(topic_href(t.topic), t.topic), t.partitions] for t in o.topics],
        )
    )


def topic_main(view: TopicView, actions: bool = False) -> str:
    """The topic page; with `actions`, an abort link for every open transaction."""
    rows = [_partition_cells(p) for p in view.partitions]
    producers = [
        [p.partition, r.producer_id, r.producer_epoch, r.transactional_id, r.last_sequence,
         r.last_timestamp, r.current_txn_start_offset,
         link(abort_href(view.topic, p.partition, r.producer_id), "abort…")
         if actions and r.current_txn_start_offset >= 0 else ""]
        for p in view.partitions for r in p.producers
    ]  # fmt: skip
    return (
        f"<h1>Topic {escape(view.topic)}</h1>"
        f"<p>{link(messages_href(view.topic), 'Browse messages')}</p>"
        + table(
            [
                "partition",
                "leader",
                "log start",
                "high watermark",
                "last stable offset",
                "LSO lag (records)",
                "LSO lag (ms)",
                "LSO pinned by",
                "size (bytes)",
                "error",
            ],
            rows,
        )  # fmt: skip
        + "<h2>Producers (DescribeProducers)</h2>"
        + table(
            [
                "partition",
                "producer id",
                "epoch",
                "transactional id",
                "last sequence",
                "last timestamp",
                "open transaction from offset",
                "action",
            ],
            producers,
        )  # fmt: skip
    )


def _partition_cells(p: PartitionRow) -> list[object]:
    pin: object = ""
    if p.pinned_by is not None:
        who = p.pinned_by.transactional_id or f"producer {p.pinned_by.producer_id}"
        pin = warn(
            f"{who} (producer id {p.pinned_by.producer_id}, epoch {p.pinned_by.producer_epoch},"
            f" open since offset {p.pinned_by.current_txn_start_offset})"
        )
    return [p.partition, p.leader, p.log_start_offset, p.high_watermark, p.last_stable_offset,
            p.lso_lag, p.lso_lag_ms, pin, p.size_bytes, p.error]  # fmt: skip


def groups_main(groups: list[GroupRow], actions: bool = False) -> str:
    """The groups page; with `actions`, a reset link for each group."""
    parts = ["<h1>Consumer groups</h1>"]
    for g in groups:
        reset = f" {link(reset_href(g.group_id), 'reset offsets…')}" if actions else ""
        parts.append(
            f"<h2>{escape(g.group_id)}</h2><p>state {escape(g.state)}, "
            f"{len(g.members)} member(s), total lag {g.total_lag}{reset}</p>"
        )
        parts.append(table(
            ["member", "client id", "host", "assignment"],
            [[m.member_id, m.client_id, m.host, ", ".join(m.assignment)] for m in g.members],
        ))  # fmt: skip
        parts.append(table(
            ["topic", "partition", "committed offset", "last stable offset", "lag"],
            [[o.topic, o.partition, o.committed_offset, o.last_stable_offset, o.lag]
             for o in g.offsets],
        ))  # fmt: skip
    return "".join(parts)


def marker_time(written_ms: int | None, now_ms: int) -> str:
    """A marker's write time as UTC and its age in seconds ("" for a marker without one)."""
    if written_ms is None:
        return ""
    return f"{utc_text(written_ms)} ({max(0, now_ms - written_ms) / 1000:.0f} s ago)"


def spark_main(queries: list[QueryProgress]) -> str:
    parts = ["<h1>Spark queries (progress markers)</h1>"]
    now = wall_clock_ms()
    for q in queries:
        behind = q.tasks_behind
        committed = marker_time(q.written_ms, now)
        parts.append(
            f"<h2>{escape(q.prefix)}</h2><p>query id {escape(q.query_id)}, last batch with "
            f"every share committed {q.batch_id}"
            + (f" at {committed}" if committed else "")
            + f", tasks {q.tasks}"
            + (f", {warn('tasks behind: ' + ', '.join(map(str, behind)))}" if behind else "")
            + "</p>"
        )
        parts.append(table(
            ["task partition", "last committed batch", "committed at", "rows", "query id"],
            [[t.task_partition, t.batch_id, marker_time(t.written_ms, now), t.rows, t.query_id]
             for t in q.task_markers],
        ))  # fmt: skip
        parts.extend(f"<p>{warn(e)}</p>" for e in q.errors)
    return "".join(parts)
