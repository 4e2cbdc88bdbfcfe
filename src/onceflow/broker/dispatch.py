"""The APIs this broker serves: api key -> handler, message classes and supported versions.

The versions come from `broker.served_versions.SUPPORTED_VERSIONS`, the single list of
advertised versions (ApiVersions answers from it, without importing this module); `HANDLERS`
names the handler of each, and `SUPPORTED` joins the two. The connection refuses anything
outside them. A version is listed only when its handler implements it and a test covers it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from onceflow.broker.handlers.add_offsets_to_txn import handle_add_offsets_to_txn
from onceflow.broker.handlers.add_partitions_to_txn import handle_add_partitions_to_txn
from onceflow.broker.handlers.alter_configs import handle_alter_configs
from onceflow.broker.handlers.alter_user_scram_credentials import (
    handle_alter_user_scram_credentials,
)
from onceflow.broker.handlers.api_versions import handle_api_versions
from onceflow.broker.handlers.create_acls import handle_create_acls
from onceflow.broker.handlers.create_partitions import handle_create_partitions
from onceflow.broker.handlers.create_topics import handle_create_topics
from onceflow.broker.handlers.delete_acls import handle_delete_acls
from onceflow.broker.handlers.delete_groups import handle_delete_groups
from onceflow.broker.handlers.delete_records import handle_delete_records
from onceflow.broker.handlers.delete_topics import handle_delete_topics
from onceflow.broker.handlers.describe_acls import handle_describe_acls
from onceflow.broker.handlers.describe_cluster import handle_describe_cluster
from onceflow.broker.handlers.describe_configs import handle_describe_configs
from onceflow.broker.handlers.describe_groups import handle_describe_groups
from onceflow.broker.handlers.describe_log_dirs import handle_describe_log_dirs
from onceflow.broker.handlers.describe_producers import handle_describe_producers
from onceflow.broker.handlers.describe_topic_partitions import handle_describe_topic_partitions
from onceflow.broker.handlers.describe_transactions import handle_describe_transactions
from onceflow.broker.handlers.describe_user_scram_credentials import (
    handle_describe_user_scram_credentials,
)
from onceflow.broker.handlers.end_txn import handle_end_txn
from onceflow.broker.handlers.fetch import handle_fetch
from onceflow.broker.handlers.find_coordinator import handle_find_coordinator
from onceflow.broker.handlers.heartbeat import handle_heartbeat
from onceflow.broker.handlers.incremental_alter_configs import handle_incremental_alter_configs
from onceflow.broker.handlers.init_producer_id import handle_init_producer_id
from onceflow.broker.handlers.join_group import handle_join_group
from onceflow.broker.handlers.leave_group import handle_leave_group
from onceflow.broker.handlers.list_groups import handle_list_groups
from onceflow.broker.handlers.list_offsets import handle_list_offsets
from onceflow.broker.handlers.list_transactions import handle_list_transactions
from onceflow.broker.handlers.metadata import handle_metadata
from onceflow.broker.handlers.offset_commit import handle_offset_commit
from onceflow.broker.handlers.offset_delete import handle_offset_delete
from onceflow.broker.handlers.offset_fetch import handle_offset_fetch
from onceflow.broker.handlers.produce import handle_produce
from onceflow.broker.handlers.sasl_authenticate import handle_sasl_authenticate
from onceflow.broker.handlers.sasl_handshake import handle_sasl_handshake
from onceflow.broker.handlers.sync_group import handle_sync_group
from onceflow.broker.handlers.txn_offset_commit import handle_txn_offset_commit
from onceflow.broker.handlers.write_txn_markers import handle_write_txn_markers
from onceflow.broker.served_versions import SUPPORTED_VERSIONS, supported_api_keys
from onceflow.protocol import messages
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.message import Message
from onceflow.protocol.messages.api_versions import ApiVersionsResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.protocol.headers import RequestHeader

RequestT = TypeVar("RequestT", bound=Message, contravariant=True)
ResponseT = TypeVar("ResponseT", bound=Message | None, covariant=True)


class Handler(Protocol[RequestT, ResponseT]):
    """`async def handle_<api>(ctx, header, request) -> <Api>Response` (None: no response)."""

    def __call__(
        self, ctx: RequestContext, header: RequestHeader, request: RequestT, /
    ) -> Awaitable[ResponseT]: ...


AnyHandler = Handler[Any, Message | None]  # the handler of some API

API_VERSIONS_KEY: Final = int(ApiKey.API_VERSIONS)

# api key -> handler, one per entry of `SUPPORTED_VERSIONS`
HANDLERS: Final[Mapping[ApiKey, AnyHandler]] = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
}

# api key -> (min version, max version, handler)
SUPPORTED: Final[dict[ApiKey, tuple[int, int, AnyHandler]]] = {
    key: (low, high, HANDLERS[key]) for key, (low, high) in SUPPORTED_VERSIONS.items()
}


@dataclass(frozen=True)
class Api:
    """One served API: its handler, message classes and version range."""

    key: int
    name: str
    min_version: int
    max_version: int
    handler: AnyHandler
    request_cls: type[Message]
    response_cls: type[Message]

    def flexible(self, version: int) -> bool:
        """True when `version` uses flexible encoding (response header v1)."""
        first = self.request_cls.FLEXIBLE_MIN
        return first is not None and version >= first


def _build_table() -> dict[int, Api]:
    if HANDLERS.keys() != SUPPORTED_VERSIONS.keys():
        raise RuntimeError("HANDLERS and SUPPORTED_VERSIONS must name the same APIs")
    table = {}
    for key, (low, high, handler) in SUPPORTED.items():
        request_cls = messages.REQUESTS[key]
        response_cls = messages.RESPONSES[key]
        spec_low, spec_high = request_cls.VALID_VERSIONS
        if low < spec_low or high > spec_high:
            raise RuntimeError(f"{key.name} {low}-{high} outside the spec's {spec_low}-{spec_high}")
        table[int(key)] = Api(int(key), key.name, low, high, handler, request_cls, response_cls)
    return table


APIS: Final[dict[int, Api]] = _build_table()


def lookup(api_key: int, version: int) -> Api | None:
    """The served API for `api_key` when `version` is supported, else None."""
    api = APIS.get(api_key)
    if api is None or not api.min_version <= version <= api.max_version:
        return None
    return api


def api_name(api_key: int) -> str:
    """Kafka's name of an api key, or `UNKNOWN` for keys we do not know."""
    try:
        return ApiKey(api_key).name
    except ValueError:
        return "UNKNOWN"


def unsupported_api_versions_response() -> ApiVersionsResponse:
    """The v0-format answer to an ApiVersions version we do not know (KIP-511)."""
    response_cls = ApiVersionsResponse
    return response_cls(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=supported_api_keys(response_cls),
    )
