"""The console's actions: abort a hanging transaction (`/actions/abort`) and reset a group's
offsets (`/groups/NAME/reset`). Each is a GET that shows what would happen (the abort's target,
the reset's form and then its dry run) and a POST that does it.

Off unless the console runs with `--allow-actions`: then every action page answers 403. A POST
must carry the console's CSRF token (a random value each console process puts in its own forms,
which another site's page cannot read) and, when the browser sends an Origin, come from the
console's own origin. The cluster's ACLs apply as to any client: the console acts as the
identity it was given, and what the broker refuses the page shows.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from onceflow.client.admin import AdminClient
from onceflow.common import TopicPartition
from onceflow.console import render, render_actions
from onceflow.console.abort import abort_open_transaction, find_abort_target
from onceflow.console.cluster import ClusterView, Gather, gather
from onceflow.console.errors import BadInput
from onceflow.console.render import Nav
from onceflow.console.render_actions import CSRF_FIELD
from onceflow.console.reset import execute_reset, parse_reset_request, plan_reset

ACTIONS_OFF = "Actions are off: start the console with --allow-actions to use this page."
REFUSED_STATUS = 403
FAILED_STATUS = 409
MAX_FORM_BYTES = 64 * 1024


def _int(params: dict[str, str], name: str) -> int:
    try:
        return int(params.get(name, ""))
    except ValueError:
        raise BadInput(f"{name} {params.get(name, '')!r} is not a whole number.") from None


def _abort_partition(params: dict[str, str]) -> tuple[TopicPartition, int]:
    topic = params.get("topic", "")
    if not topic:
        raise BadInput("Name the topic of the transaction to abort.")
    return TopicPartition(topic, _int(params, "partition")), _int(params, "producer_id")


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise BadInput("The form is too large.")
    return dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


def _page(nav: Nav, title: str, main: str, status: int = 200) -> Response:
    return HTMLResponse(render.page(title, main, poll=False, nav=nav), status_code=status)


def action_routes(cluster: ClusterView, allow_actions: bool, nav: Nav = render.NAV) -> list[Route]:
    """The action pages (with the navigation `nav`); each answers 403 unless `allow_actions`."""
    csrf = secrets.token_urlsafe(32)

    def guarded(title: str, handler: Gather) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            if not allow_actions:
                return _page(nav, title, render.error_main(title, ACTIONS_OFF), 403)
            if request.method == "POST":
                try:
                    form = await _form(request)
                except BadInput as exc:
                    return _page(nav, title, render.error_main(title, str(exc)), 400)
                token = form.get(CSRF_FIELD, "")
                if not hmac.compare_digest(token, csrf) or not _same_origin(request):
                    message = "The form's CSRF token is missing or stale: reload the page."
                    return _page(nav, title, render.error_main(title, message), 403)
                request.state.form = form
            data, status, message = await gather(cluster, handler, request)
            if status != 200:
                return _page(nav, title, render.error_main(title, message), status)
            main, status = data
            return _page(nav, title, main, status)

        return endpoint

    def abort_confirm(admin: AdminClient, request: Request) -> tuple[str, int]:
        tp, producer_id = _abort_partition(dict(request.query_params))
        target = find_abort_target(admin, tp, producer_id)
        return render_actions.abort_confirm_main(target, csrf), 200

    def abort_do(admin: AdminClient, request: Request) -> tuple[str, int]:
        tp, producer_id = _abort_partition(request.state.form)
        outcome = abort_open_transaction(admin, tp, producer_id)
        status = 200
        if outcome.error is not None:
            refused = "AUTHORIZATION" in outcome.error
            status = REFUSED_STATUS if refused else FAILED_STATUS
        return render_actions.abort_result_main(outcome), status

    def reset_form(admin: AdminClient, request: Request) -> tuple[str, int]:
        group_id = request.path_params["group"]
        topics = sorted(admin.list_topics())
        form = dict(request.query_params)
        return render_actions.reset_form_main(group_id, topics, form, csrf), 200

    def reset_do(admin: AdminClient, request: Request) -> tuple[str, int]:
        form: dict[str, str] = request.state.form
        reset = parse_reset_request(request.path_params["group"], form)
        if form.get("dry_run") == "1":
            return render_actions.reset_plan_main(plan_reset(admin, reset), csrf, None), 200
        plan, errors = execute_reset(admin, reset)
        status = FAILED_STATUS if errors else 200
        return render_actions.reset_plan_main(plan, csrf, errors), status

    def by_method(title: str, show: Gather, act: Gather) -> Callable[[Request], Any]:
        """GET shows (`show`), POST acts (`act`)."""
        get, post = guarded(title, show), guarded(title, act)

        async def endpoint(request: Request) -> Response:
            chosen = post if request.method == "POST" else get
            response: Response = await chosen(request)
            return response

        return endpoint

    return [
        Route("/actions/abort", by_method("Abort a transaction", abort_confirm, abort_do),
              methods=["GET", "POST"]),
        Route("/groups/{group:path}/reset", by_method("Reset offsets", reset_form, reset_do),
              methods=["GET", "POST"]),  # a group id may hold "/"
    ]  # fmt: skip
