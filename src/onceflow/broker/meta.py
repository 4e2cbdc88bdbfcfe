"""`meta.properties` in the data directory: the cluster id and node id, stable across restarts.

Kafka writes this file when it formats a log directory; onceflow writes it on first start.
The cluster id is 22 characters of URL-safe base64 of a random UUID, like Kafka's `Uuid`.
A node id that differs from the stored one is refused (the directory belongs to another node).
"""

from __future__ import annotations

import base64
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from onceflow.broker.config import ConfigError
from onceflow.properties import parse_properties

META_FILE = "meta.properties"


@dataclass(frozen=True)
class MetaProperties:
    """The identity of a data directory."""

    cluster_id: str
    node_id: int


def random_cluster_id() -> str:
    """A new cluster id: URL-safe base64 of a random UUID without padding (22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def load_or_create(data_dir: str | os.PathLike[str], node_id: int) -> MetaProperties:
    """Read `meta.properties`, or write a new one with a fresh cluster id (atomically).

    Raises ConfigError when the stored node id is not `node_id` or the file is damaged.
    """
    directory = Path(data_dir)
    path = directory / META_FILE
    if path.exists():
        props = parse_properties(path.read_text(encoding="utf-8"))
        cluster_id = props.get("cluster.id", "")
        try:
            stored_node = int(props.get("node.id", ""))
        except ValueError:
            raise ConfigError(f"{path}: node.id missing or not a number") from None
        if not cluster_id:
            raise ConfigError(f"{path}: cluster.id missing")
        if stored_node != node_id:
            raise ConfigError(
                f"{path}: stored node.id {stored_node} does not match configured node.id {node_id}"
            )
        return MetaProperties(cluster_id, stored_node)
    directory.mkdir(parents=True, exist_ok=True)
    meta = MetaProperties(random_cluster_id(), node_id)
    text = (
        "# written by onceflow on first start; do not edit\n"
        f"version=1\ncluster.id={meta.cluster_id}\nnode.id={meta.node_id}\n"
    )
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return meta
