"""The API versions this broker serves: api key -> (min version, max version).

`SUPPORTED_VERSIONS` is the single list of advertised versions; ApiVersions answers from it
(`supported_api_keys`) and the connection refuses anything outside it (`broker.dispatch` pairs
each entry with its handler). A version is listed only when its handler implements it and a
test covers it. A leaf module: handlers (ApiVersions) read it without importing the dispatch
table that imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from onceflow.protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from onceflow.protocol.messages.api_versions import ApiVersionsResponse

SUPPORTED_VERSIONS: Final[Mapping[ApiKey, tuple[int, int]]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 12),
        ApiKey.FETCH: (4, 16),
        ApiKey.LIST_OFFSETS: (1, 10),
        ApiKey.METADATA: (0, 13),
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.OFFSET_FETCH: (1, 9),
        ApiKey.FIND_COORDINATOR: (0, 5),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 6),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 5),
        ApiKey.WRITE_TXN_MARKERS: (1, 2),
        ApiKey.TXN_OFFSET_COMMIT: (0, 5),
        ApiKey.DESCRIBE_ACLS: (1, 3),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_CLUSTER: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 2),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    }
)


def supported_api_keys(
    response_cls: type[ApiVersionsResponse],
) -> list[ApiVersionsResponse.ApiVersion]:
    """ApiVersionsResponse.api_keys entries for every served API, in key order."""
    entry = response_cls.ApiVersion
    return [
        entry(api_key=int(key), min_version=low, max_version=high)
        for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    ]
