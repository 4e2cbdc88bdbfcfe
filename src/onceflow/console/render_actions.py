"""HTML for the message browser and the action pages (abort a transaction, reset a group's
offsets). Every form that changes something is a POST carrying the console's CSRF token, and
each action asks first: the abort shows what it will abort, the reset shows its dry run.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from onceflow.console.abort import AbortOutcome, AbortTarget
from onceflow.console.browse import FORMATS, ISOLATION_LEVELS, BrowseView, ShownBytes
from onceflow.console.render import Html, messages_href, reset_href, table, topic_href, warn
from onceflow.console.reset import STRATEGIES, ResetPlan

CSRF_FIELD = "csrf_token"


def _hidden(fields: Mapping[str, object]) -> str:
    return "".join(
        f'<input type="hidden" name="{escape(k)}" value="{escape(str(v))}">'
        for k, v in fields.items()
    )


def _select(name: str, options: tuple[str, ...], chosen: str) -> str:
    opts = "".join(
        f"<option{' selected' if o == chosen else ''}>{escape(o)}</option>" for o in options
    )
    return f'<select name="{name}" id="{name}">{opts}</select>'


def _shown(b: ShownBytes) -> Html:
    if b.text is None:
        return Html("<i>null</i>")
    note = f"{b.shown_as}, {b.size} bytes" + (", cut" if b.truncated else "")
    return Html(f"<pre>{escape(b.text)}</pre><small>{escape(note)}</small>")


def browse_form(topic: str, params: dict[str, str]) -> str:
    """The browser's form (a GET: it only reads), filled in with the last query."""

    def text(name: str, label: str) -> str:
        value = escape(params.get(name, ""))
        return f'<label>{label} <input name="{name}" id="{name}" value="{value}" size="8">'

    return (
        f'<form method="get" action="{escape(messages_href(topic))}" id="browse">'
        + text("partition", "partition")
        + "</label> "
        + text("offset", "from offset")
        + "</label> "
        + text("timestamp", "or from timestamp (ms)")
        + "</label> "
        + text("limit", "at most")
        + "</label> "
        + "<label>isolation "
        + _select("isolation", ISOLATION_LEVELS, params.get("isolation", ISOLATION_LEVELS[0]))
        + "</label> <label>as "
        + _select("format", FORMATS, params.get("format", FORMATS[0]))
        + "</label>"
        + ' <button type="submit">Browse</button></form>'
    )


def browse_main(topic: str, params: dict[str, str], view: BrowseView | None, error: str) -> str:
    """The message browser page: the form, then the records or what was wrong."""
    head = f"<h1>Messages of {escape(topic)}</h1>" + browse_form(topic, params)
    if view is None:
        return head + f'<p class="error">{warn(error)}</p>'
    q, o = view.query, view.offsets
    facts = (
        f"<p>Partition {q.partition}: log start offset {o.log_start_offset}, last stable "
        f"offset {o.last_stable_offset}, high watermark {o.high_watermark}. Read "
        f"{escape(q.isolation_level)}"
        f" from offset {view.start_offset} up to {view.end_offset}: "
        f'<span id="count">{len(view.messages)}</span> record(s).</p>'
    )
    rows = [
        [m.offset, m.timestamp, _shown(m.key), _shown(m.value),
         Html("".join(f"{escape(k)}: {_shown(v)}" for k, v in m.headers))]
        for m in view.messages
    ]  # fmt: skip
    return head + facts + table(["offset", "timestamp", "key", "value", "headers"], rows)


def abort_confirm_main(target: AbortTarget, csrf: str) -> str:
    """What the abort will do, and the button that does it."""
    tp = target.partition
    where = f"{tp.topic}-{tp.partition}"
    if target.producer is None:
        why = target.error or f"Producer {target.producer_id} has no open transaction on {where}."
        return f"<h1>Abort a transaction</h1><p>{warn(why)}</p>"
    p = target.producer
    fields = {"topic": tp.topic, "partition": tp.partition, "producer_id": p.producer_id,
              CSRF_FIELD: csrf}  # fmt: skip
    return (
        f"<h1>Abort a transaction</h1><p>Abort the open transaction of producer {p.producer_id} "
        f"(epoch {p.producer_epoch}, coordinator epoch {p.coordinator_epoch}) on {escape(where)}, "
        f"open since offset {p.current_txn_start_offset}? An ABORT marker is written "
        "(WriteTxnMarkers); its records will never be read by read_committed consumers.</p>"
        f'<form method="post" action="/actions/abort">{_hidden(fields)}'
        '<button type="submit" id="confirm-abort">Abort the transaction</button></form>'
        f'<p><a href="{escape(topic_href(tp.topic))}">Cancel</a></p>'
    )


def abort_result_main(outcome: AbortOutcome) -> str:
    tp = outcome.target.partition
    where = f"{tp.topic}-{tp.partition}"
    back = f'<p><a href="{escape(topic_href(tp.topic))}">Back to {escape(tp.topic)}</a></p>'
    if outcome.error is not None:
        return (
            f'<h1>Abort refused</h1><p id="outcome">{warn("The broker refused: " + outcome.error)}'
            f"</p>{back}"
        )
    return (
        f'<h1>Transaction aborted</h1><p id="outcome">ABORT marker written for producer '
        f"{outcome.target.producer_id} on {escape(where)}; its last stable offset is now "
        f"{outcome.last_stable_offset}.</p>{back}"
    )


def reset_form_main(group_id: str, topics: list[str], form: dict[str, str], csrf: str) -> str:
    """The reset form: topic, strategy and value; its button asks for a dry run."""
    topic_select = _select("topic", tuple(topics), form.get("topic", ""))
    value = escape(form.get("value", ""))
    return (
        f"<h1>Reset offsets of {escape(group_id)}</h1>"
        "<p>As kafka-consumer-groups --reset-offsets: only while the group has no members. "
        "The dry run shows the plan; nothing changes until you execute it.</p>"
        f'<form method="post" action="{escape(reset_href(group_id))}">'
        + _hidden({CSRF_FIELD: csrf, "dry_run": "1"})
        + f"<label>topic {topic_select}</label> "
        + f"<label>strategy {_select('strategy', STRATEGIES, form.get('strategy', ''))}</label> "
        + f'<label>offset or time <input name="value" id="value" value="{value}"></label> '
        + '<button type="submit" id="dry-run">Dry run</button></form>'
    )


def reset_plan_main(plan: ResetPlan, csrf: str, executed: dict[str, str] | None) -> str:
    """The plan; after a dry run the button that executes it, after execution the outcome."""
    r = plan.request
    rows = [[row.topic, row.partition, row.current_offset, row.new_offset] for row in plan.rows]
    title = "Offsets reset" if executed is not None else "Reset plan (dry run)"
    out = (
        f"<h1>{title}: {escape(r.group_id)}</h1><p>{escape(r.strategy)} {escape(r.value)} on "
        f"{escape(r.topic)}; the group is {escape(plan.group_state)}.</p>"
        + table(["topic", "partition", "current offset", "new offset"], rows)
    )
    if executed is None:
        fields = {CSRF_FIELD: csrf, "topic": r.topic, "strategy": r.strategy, "value": r.value}
        return out + (
            f'<form method="post" action="{escape(reset_href(r.group_id))}">{_hidden(fields)}'
            '<button type="submit" id="execute-reset">Execute this reset</button></form>'
        )
    if executed:
        failed = "; ".join(f"{tp}: {code}" for tp, code in executed.items())
        return out + f'<p id="outcome">{warn("Not stored: " + failed)}</p>'
    return out + '<p id="outcome">The new offsets are committed.</p>'
