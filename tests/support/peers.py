"""The brokers a client test can run against: onceflow's, and Apache Kafka with transaction
version 2 (Kafka 4.x's default for a new cluster) and 1.

A test that takes the `peer` fixture (tests/conftest.py) runs once per broker kind. It gets a
`Peer`: `bootstrap`, `name(base)` for topic, group and transactional ids that no other test
uses (Kafka clusters are shared by the whole session, so fixed names would collide; within one
test the same base gives the same name),
`pause()`/`resume()` (SIGSTOP/SIGCONT of every broker process) and `restart()`. The onceflow
broker is a fresh process per test, started with quick group and transaction settings; Kafka
clusters are started once per session on first use, with the same settings
(support.kafka_cluster).
"""

from __future__ import annotations

import itertools
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from support.broker import BrokerProcess
from support.kafka_cluster import KafkaCluster

# fast groups: no initial delay, short sessions allowed, few __consumer_offsets partitions
GROUP_BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 500,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.num.partitions": 4,
}

# the onceflow broker's settings for group and transaction tests; KafkaCluster's nodes are
# configured to match (no rebalance delay, short sessions, few internal partitions)
FAST_GROUP_BROKER = {
    **GROUP_BROKER_CONFIG,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
    # Kafka without an authorizer lets any client write transaction markers (KIP-664's
    # abortTransaction); onceflow asks for this setting and a loopback client
    "onceflow.admin.allow.write.txn.markers": "true",
}

ONCEFLOW = "onceflow"
KAFKA_TV2 = "kafka-tv2"
KAFKA_TV1 = "kafka-tv1"
KINDS = (ONCEFLOW, KAFKA_TV2, KAFKA_TV1)
TRANSACTION_VERSION = {KAFKA_TV2: 2, KAFKA_TV1: 1}

_names = itertools.count()


@dataclass
class Peer:
    """One broker (or cluster) under test."""

    kind: str
    broker: BrokerProcess | None = None
    cluster: KafkaCluster | None = None
    suffix: str = field(default_factory=lambda: f"{os.getpid()}-{next(_names)}")

    @property
    def bootstrap(self) -> str:
        if self.broker is not None:
            return self.broker.bootstrap
        assert self.cluster is not None
        return self.cluster.bootstrap

    @property
    def is_kafka(self) -> bool:
        return self.cluster is not None

    @property
    def transaction_version(self) -> int | None:
        """The cluster's transaction.version; None for the onceflow broker (version 1)."""
        return self.cluster.transaction_version if self.cluster is not None else None

    def name(self, base: str) -> str:
        """`base` made unique to this test (a suffix of the pid and a counter)."""
        return f"{base}-{self.suffix}"

    def pause(self) -> None:
        """Freeze every broker process (SIGSTOP): requests stay unanswered."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> None:
        """Stop and start the broker (onceflow) or, on Kafka, each node in turn."""
        if self.broker is not None:
            self.broker.restart()
            return
        assert self.cluster is not None
        for node in self.cluster.nodes:
            if node.proc is not None:
                node.proc.terminate()
                node.proc.wait(30)
            self.cluster.restart(node.node_id)

    def log_text(self) -> str:
        if self.broker is not None:
            return self.broker.log_text()
        assert self.cluster is not None
        return self.cluster.log_text()

    def _signal(self, signum: int) -> None:
        if self.broker is not None:
            self.broker._signal(signum)
            return
        assert self.cluster is not None
        for node in self.cluster.nodes:
            if node.is_running():
                assert node.proc is not None
                node.proc.send_signal(signum)


class KafkaClusters:
    """Kafka clusters shared by a test session, started on first use, stopped at the end."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self._clusters: dict[tuple[int, int], KafkaCluster] = {}

    def get(self, nodes: int = 1, transaction_version: int = 2) -> KafkaCluster:
        key = (nodes, transaction_version)
        cluster = self._clusters.get(key)
        if cluster is None:
            directory = self.base_dir / f"kafka-{nodes}n-tv{transaction_version}"
            cluster = KafkaCluster(directory, nodes, transaction_version=transaction_version)
            self._clusters[key] = cluster
            cluster.start()
        return cluster

    def stop(self) -> None:
        for cluster in self._clusters.values():
            cluster.stop()
