"""ListTransactions handler (KIP-664 tooling).

API: ListTransactions (key 66), versions 0-2.

Behaviour: the coordinator's transactional ids (`TransactionCoordinator.list_transactions`)
matching every filter given: states by Kafka's name (unknown names are echoed in
unknown_state_filters and match nothing), producer ids, v1 duration_filter (only
transactions open longer than that many ms; -1 = no filter), v2 transactional_id_pattern (a
regular expression the whole id must match, Java's `Matcher.matches`; an invalid pattern is
INVALID_REGULAR_EXPRESSION). Ids are sorted. Before the coordinator loads:
COORDINATOR_LOAD_IN_PROGRESS; before it was ever looked up, an empty list (no transactional
id can exist yet).

Authorization (authorizer on): only the ids the caller may DESCRIBE are listed, as Kafka.

Deviations: patterns use Python's `re` syntax, close to Java's for ordinary patterns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from onceflow.broker.authorization import allowed_names
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.list_transactions import ListTransactionsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.list_transactions import ListTransactionsRequest

_State = ListTransactionsResponse.TransactionState


def _answer(
    error: ErrorCode,
    unknown: Iterable[str] = (),
    states: Iterable[ListTransactionsResponse.TransactionState] = (),
) -> ListTransactionsResponse:
    return ListTransactionsResponse(
        throttle_time_ms=0,
        error_code=error,
        unknown_state_filters=list(unknown),
        transaction_states=list(states),
    )


async def handle_list_transactions(
    ctx: RequestContext, header: RequestHeader, request: ListTransactionsRequest
) -> ListTransactionsResponse:
    """List transactional ids matching the filters."""
    version = header.request_api_version
    pattern = None
    if version >= 2 and request.transactional_id_pattern:
        try:
            pattern = re.compile(request.transactional_id_pattern)
        except re.error:
            return _answer(ErrorCode.INVALID_REGULAR_EXPRESSION)
    transactions = ctx.broker.transactions
    not_ready = transactions.not_ready_error()
    if not_ready == ErrorCode.NOT_COORDINATOR:
        return _answer(ErrorCode.NONE)
    if not_ready is not None:
        return _answer(not_ready)
    result = transactions.coordinator.list_transactions(
        request.state_filters,
        request.producer_id_filters,
        request.duration_filter if version >= 1 else -1,
    )
    matching = [
        t for t in result.transactions if pattern is None or pattern.fullmatch(t.transactional_id)
    ]
    shown = set(
        allowed_names(
            ctx,
            ApiKey.LIST_TRANSACTIONS,
            "transactional_id",
            [t.transactional_id for t in matching],
        )
    )
    return _answer(
        result.error,
        result.unknown_state_filters,
        (
            _State(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state,
            )
            for t in matching
            if t.transactional_id in shown
        ),
    )
