"""The admin client's connections: the bootstrap broker, partition leaders and coordinators.

`AdminConnections` owns every blocking `BrokerConnection` an `AdminClient` opens and the cache
of coordinators found with FindCoordinator; `AdminClient` and its extension modules
(`config_admin`, `group_admin`) all send through it, so none of them reaches into another's
private state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from onceflow.client.connection import BrokerConnection, connect_bootstrap
from onceflow.client.errors import raise_for_error
from onceflow.client.net.metadata import BrokerNode
from onceflow.client.net.security import client_security
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.find_coordinator import FindCoordinatorRequest
from onceflow.protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = ["GROUP_KEY", "TRANSACTION_KEY", "AdminConnections", "BrokerNode", "known_code"]

GROUP_KEY = 0  # FindCoordinator key types
TRANSACTION_KEY = 1
RETRY_S = 0.05
BATCH_KEYS = 1000  # coordinator keys per batched FindCoordinator (v4+, KIP-699)
COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
GROUP_RETRIABLE = COORDINATOR_MOVED | {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.UNSTABLE_OFFSET_COMMIT,
}


def known_code(value: int) -> ErrorCode:
    """The `ErrorCode` of a response field (UNKNOWN_SERVER_ERROR for a code we do not know)."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def wait_retriable(code: int, deadline: float, what: str) -> bool:
    """True to retry after a short pause (coordinator loading or moving, offsets pending a
    transaction); raises on other errors or when `deadline` has passed."""
    if code == ErrorCode.NONE:
        return False
    if code not in GROUP_RETRIABLE or time.monotonic() >= deadline:
        raise_for_error(code, what)
    time.sleep(RETRY_S)
    return True


class AdminConnections:
    """Connections opened on first use and kept until `close()`; a broken one is reopened."""

    def __init__(self, config: Mapping[str, Any]):
        if "bootstrap.servers" not in config:
            raise ValueError("bootstrap.servers is required")
        self.bootstrap_servers = str(config["bootstrap.servers"])
        self.client_id = str(config.get("client.id", "onceflow-admin"))
        self.request_timeout_ms = int(config.get("request.timeout.ms", 30_000))
        self.security = client_security(config)
        self._bootstrap: BrokerConnection | None = None
        self._nodes: dict[int, BrokerConnection] = {}
        self._coordinators: dict[tuple[int, str], BrokerNode] = {}

    def bootstrap(self) -> BrokerConnection:
        """The bootstrap broker (on a single node also the controller)."""
        if self._bootstrap is None or not self._bootstrap.connected:
            self._bootstrap = connect_bootstrap(
                self.bootstrap_servers,
                client_id=self.client_id,
                request_timeout_ms=self.request_timeout_ms,
                security=self.security,
            )
        return self._bootstrap

    def to_node(self, node: BrokerNode) -> BrokerConnection:
        """A connection to `node` (the bootstrap one when it is the same address)."""
        bootstrap = self.bootstrap()
        if (node.host, node.port) == (bootstrap.host, bootstrap.port):
            return bootstrap
        conn = self._nodes.get(node.node_id)
        if conn is None or not conn.connected:
            conn = BrokerConnection(
                node.host,
                node.port,
                client_id=self.client_id,
                request_timeout_ms=self.request_timeout_ms,
                security=self.security,
            ).connect()
            self._nodes[node.node_id] = conn
        return conn

    def metadata(
        self, topics: list[str] | None
    ) -> tuple[list[BrokerNode], list[MetadataResponse.MetadataResponseTopic]]:
        """Metadata for `topics` (every topic when None): the brokers and the topics."""
        cls = MetadataRequest
        wanted = None if topics is None else [cls.MetadataRequestTopic(name=t) for t in topics]
        request = cls(topics=wanted, allow_auto_topic_creation=False)
        response = self.bootstrap().send(request)
        brokers = [BrokerNode(b.node_id, b.host, b.port) for b in response.brokers]
        return brokers, list(response.topics)

    def to_coordinator(self, key_type: int, key: str, deadline: float) -> BrokerConnection:
        """A connection to the coordinator of a group (`GROUP_KEY`) or a transactional id
        (`TRANSACTION_KEY`), found with FindCoordinator (retried until `deadline`) and cached
        until `forget_coordinator`."""
        return self.to_node(self.coordinator(key_type, key, deadline))

    def coordinator(self, key_type: int, key: str, deadline: float) -> BrokerNode:
        """The coordinator node of a group or a transactional id (see `to_coordinator`)."""
        node = self._coordinators.get((key_type, key))
        cls = FindCoordinatorRequest
        while node is None:
            conn = self.bootstrap()
            version = min(conn.api_version(ApiKey.FIND_COORDINATOR), 5)
            if version >= 4:
                response = conn.send(cls(key_type=key_type, coordinator_keys=[key]), version)
                c = response.coordinators[0]
                code, node = c.error_code, BrokerNode(c.node_id, c.host, c.port)
            else:
                response = conn.send(cls(key=key, key_type=key_type), version)
                code = response.error_code
                node = BrokerNode(response.node_id, response.host, response.port)
            if wait_retriable(code, deadline, f"FindCoordinator for {key!r}"):
                node = None
        self._coordinators[(key_type, key)] = node
        return node

    def find_coordinators(self, key_type: int, keys: Iterable[str]) -> None:
        """Look up and cache the coordinators of the `keys` not cached yet, up to `BATCH_KEYS`
        keys per FindCoordinator (v4+, KIP-699). A key whose lookup failed, or every key
        against a broker without batched lookups, is left to `to_coordinator`."""
        cls = FindCoordinatorRequest
        missing = [k for k in dict.fromkeys(keys) if (key_type, k) not in self._coordinators]
        conn = self.bootstrap()
        version = min(conn.api_version(ApiKey.FIND_COORDINATOR), 5)
        if version < 4:
            return
        for start in range(0, len(missing), BATCH_KEYS):
            chunk = missing[start : start + BATCH_KEYS]
            response = conn.send(cls(key_type=key_type, coordinator_keys=chunk), version)
            for c in response.coordinators:
                if c.error_code == ErrorCode.NONE:
                    self._coordinators[(key_type, c.key)] = BrokerNode(c.node_id, c.host, c.port)

    def cached_coordinator(self, key_type: int, key: str) -> BrokerNode | None:
        """The coordinator of `key` as last looked up, None if not known."""
        return self._coordinators.get((key_type, key))

    def forget_coordinator(self, key_type: int, key: str) -> None:
        """The coordinator moved: the next `to_coordinator` looks it up again."""
        self._coordinators.pop((key_type, key), None)

    def close(self) -> None:
        """Close every connection and forget the coordinators."""
        for conn in [self._bootstrap, *self._nodes.values()]:
            if conn is not None:
                conn.close()
        self._bootstrap = None
        self._nodes.clear()
        self._coordinators.clear()
