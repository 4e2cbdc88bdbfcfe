"""In-process handler calls for tests: a `BrokerState` on a temporary directory and a `call`
that goes through the wire encoding both ways (request encoded/decoded at the version, the
response encoded at the version and decoded back), as a connection would."""

from __future__ import annotations

from onceflow.broker import dispatch
from onceflow.broker.config import BrokerConfig
from onceflow.broker.context import ANONYMOUS, RequestContext
from onceflow.broker.state import BrokerState
from onceflow.protocol import messages
from onceflow.protocol.headers import RequestHeader
from onceflow.records.batch import iter_batches
from onceflow.records.builder import BatchBuilder
from onceflow.records.record import decode_records


def open_state(data_dir, **overrides) -> BrokerState:
    """A BrokerState on `data_dir` with `overrides` (dotted keys) applied."""
    values = {"log.dirs": str(data_dir)}
    values.update(
        {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in overrides.items()}
    )
    return BrokerState.open(BrokerConfig(values))


async def call(
    state: BrokerState,
    api_key: int,
    version: int,
    request,
    *,
    raw: bool = False,
    principal: str = ANONYMOUS,
    peer: str = "test-peer",
):
    """Run the handler for `request` at `version`; returns the decoded response (or None).

    With `raw` the request object is passed as is (no encode/decode round trip); `principal`
    and `peer` are the caller's as the connection would set them."""
    api = dispatch.lookup(api_key, version)
    if api is None:
        raise ValueError(f"api {api_key} v{version} not served")
    if not raw:
        request = api.request_cls.decode(request.encode(version), version)
    header = RequestHeader(
        request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="test"
    )
    ctx = RequestContext(state, peer, None, principal=principal)
    response = await api.handler(ctx, header, request)
    if response is None:
        return None
    return api.response_cls.decode(response.encode(version), version)


def make_batch(values, *, key_prefix: bytes | None = b"k", timestamp: int | None = None, **kwargs):
    """A v2 batch (bytearray) with one record per value; `kwargs` go to `BatchBuilder`."""
    builder = BatchBuilder(**kwargs)
    for i, value in enumerate(values):
        key = None if key_prefix is None else key_prefix + b"%d" % i
        builder.append(timestamp, key, value)
    return builder.build()


def decode_all(records) -> list:
    """Every record of a record set, as `(offset, key, value)`."""
    out = []
    for header, view in iter_batches(records):
        for record in decode_records(view):
            out.append((header.base_offset + record.offset_delta, record.key, record.value))
    return out


def request_class(api_key: int):
    return messages.REQUESTS[api_key]
