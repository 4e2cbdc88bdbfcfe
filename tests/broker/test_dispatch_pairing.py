"""Each API key's handler takes that API's request class and answers its response class (or
None: Produce with acks=0), read from the handlers' own annotations. mypy checks each
handler's body against its annotations; this checks the registration in `HANDLERS`, which
mypy sees only as `Handler[Any, Message | None]`."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable

from onceflow.broker.dispatch import HANDLERS
from onceflow.protocol import messages

# every message class by name, and stand-ins for the names handlers import for typing only
NAMES = {
    **{c.__name__: c for c in [*messages.REQUESTS.values(), *messages.RESPONSES.values()]},
    "RequestContext": object,
    "RequestHeader": object,
}


def _pairing(handler: Callable[..., object]) -> tuple[object, object]:
    hints = typing.get_type_hints(handler, localns=NAMES)
    request = list(inspect.signature(handler).parameters)[2]
    return hints[request], hints["return"]


def test_every_handler_takes_its_apis_request_and_answers_its_response() -> None:
    wrong = []
    for key, handler in HANDLERS.items():
        request, response = _pairing(handler)
        expected = messages.RESPONSES[key]
        if request is not messages.REQUESTS[key] or response not in (expected, expected | None):
            wrong.append(f"{key.name}: {handler.__name__}({request}) -> {response}")
    assert wrong == []
