"""FindCoordinator for one key, as the producer's transactions and the consumer's group use it.

`find_coordinator_request(version, key_type, key)` builds the request: v4+ take a list of keys
(KIP-699), earlier versions one. `parse_coordinator(response, version)` takes the answer apart
into (error code, node id, host, port); `find_coordinator` sends one on a connection.
"""

from __future__ import annotations

from typing import Final

from onceflow.client.net.network import AsyncBrokerConnection
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)

__all__ = [
    "FIND_COORDINATOR_MAX",
    "GROUP",
    "TRANSACTION",
    "find_coordinator",
    "find_coordinator_request",
    "parse_coordinator",
]

GROUP: Final = 0  # FindCoordinator key types
TRANSACTION: Final = 1
FIND_COORDINATOR_MAX: Final = 5
_BATCHED_FIND_VERSION = 4  # FindCoordinator v4+ takes a list of keys (KIP-699)


def find_coordinator_request(version: int, key_type: int, key: str) -> FindCoordinatorRequest:
    """A FindCoordinator request for `key` at `version`."""
    if version >= _BATCHED_FIND_VERSION:
        return FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
    return FindCoordinatorRequest(key=key, key_type=key_type)


def parse_coordinator(response: FindCoordinatorResponse, version: int) -> tuple[int, int, str, int]:
    """A FindCoordinator answer for one key: (error code, node id, host, port)."""
    if version >= _BATCHED_FIND_VERSION:
        if not response.coordinators:
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), -1, "", -1
        c = response.coordinators[0]
        return c.error_code, c.node_id, c.host, c.port
    return response.error_code, response.node_id, response.host, response.port


async def find_coordinator(
    conn: AsyncBrokerConnection, key_type: int, key: str, timeout_s: float
) -> tuple[int, int, str, int]:
    """FindCoordinator for one key: (error code, node id, host, port)."""
    version = conn.api_version(ApiKey.FIND_COORDINATOR, max_version=FIND_COORDINATOR_MAX)
    request = find_coordinator_request(version, key_type, key)
    response = await conn.send(request, version, timeout_s=timeout_s)
    return parse_coordinator(response, version)
