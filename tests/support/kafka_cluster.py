"""`KafkaCluster`: Apache Kafka itself, 1 or 3 KRaft nodes on loopback, as a peer in tests.

Each node is a combined broker+controller (`process.roles=broker,controller`) in its own JVM,
with its own data directory, log file and two loopback ports (client and controller listener);
the controllers form a static quorum (`controller.quorum.voters`). The jars come from
`scripts/fetch_kafka.sh` (`.cache/kafka-VERSION/libs`); `transaction_version` is the
`transaction.version` feature the cluster is formatted with: 2 is Kafka 4.x's default for a new
cluster (KIP-890 part 2), 1 the older protocol. Replicated internal topics follow the node count
(3 nodes: replication factor 3, `min.insync.replicas` 2).

With `sasl_ssl=SaslSsl(keystore, users)` every node also listens for SASL_SSL (SCRAM-SHA-512,
server certificate and key from one PEM file; the users are created when the storage is
formatted); `sasl_ssl_bootstrap` names those listeners.

With `extra_listeners={"NAME": "SASL_PLAINTEXT", ...}` every node also listens on those
listeners (their settings, `listener.name.<name>.*`, go in `extra_config`; `jvm_options` adds
system properties); `listener_bootstrap(name)` names them.

`kill(node_id)` is a kill -9, `restart(node_id)` starts the node again on the same ports and
data; `log_text()` gives every node's log for a failure message. Nothing here is onceflow code:
it only runs Kafka's own classes (`kafka.tools.StorageTool`, `kafka.Kafka`) and asks the
cluster's metadata through confluent-kafka. Nodes get SIGTERM when the process that started
them dies (onceflow.process.child_options), so a killed test run leaves no JVM behind.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from onceflow.process import child_options

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
JVM_HEAP = ["-Xms128m", "-Xmx768m"]
LOG4J2 = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Logger:
      - name: kafka.request.logger
        level: WARN
      - name: org.apache.kafka.clients
        level: WARN
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
"""


class KafkaUnavailable(RuntimeError):
    """Kafka's jars or a Java runtime are missing: run scripts/setup.sh."""


class KafkaStartError(RuntimeError):
    """A Kafka node exited or did not become ready in time; carries the node logs."""


def kafka_version() -> str:
    """The Apache Kafka version pinned in scripts/kafka/pom.xml."""
    text = (REPO / "scripts" / "kafka" / "pom.xml").read_text()
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", text)
    if match is None:
        raise KafkaUnavailable("scripts/kafka/pom.xml names no kafka.version")
    return match.group(1)


def kafka_libs() -> Path:
    """The folder of Kafka's jars; raises KafkaUnavailable when they were not fetched."""
    libs = REPO / ".cache" / f"kafka-{kafka_version()}" / "libs"
    if not (libs / ".complete").exists():
        raise KafkaUnavailable(f"{libs} is missing: run scripts/fetch_kafka.sh (or setup.sh)")
    if shutil.which("java") is None:
        raise KafkaUnavailable("no `java` on the PATH: run scripts/setup.sh")
    return libs


def spark_kafka_jars() -> list[str]:
    """The jars of Spark's built-in Kafka connector (scripts/kafka/spark-kafka-pom.xml), for
    `spark.jars`; raises KafkaUnavailable when they were not fetched."""
    pom = (REPO / "scripts" / "kafka" / "spark-kafka-pom.xml").read_text()
    match = re.search(r"<spark\.version>([^<]+)</spark\.version>", pom)
    if match is None:
        raise KafkaUnavailable("scripts/kafka/spark-kafka-pom.xml names no spark.version")
    libs = REPO / ".cache" / f"spark-kafka-{match.group(1)}" / "libs"
    if not (libs / ".complete").exists():
        raise KafkaUnavailable(f"{libs} is missing: run scripts/fetch_kafka.sh (or setup.sh)")
    return sorted(str(jar) for jar in libs.glob("*.jar"))


def java_command(main_class: str, *args: str, heap: list[str] | None = None) -> list[str]:
    """argv running one of Kafka's classes (a tool's or the broker's) with the fetched jars."""
    classpath = f"{kafka_libs()}/*"
    return ["java", *(heap or ["-Xmx512m"]), "-cp", classpath, main_class, *args]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class SaslSsl:
    """A SASL_SSL listener on every node: SCRAM-SHA-512 users, TLS from a PEM keystore (the
    certificate chain and an unencrypted PKCS#8 key in one file)."""

    keystore: str
    users: dict[str, str]  # name -> password


@dataclass
class KafkaNode:
    """One combined broker+controller JVM."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    sasl_ssl_port: int = 0
    extra_ports: dict[str, int] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "node.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class KafkaCluster:
    """A KRaft cluster of `nodes` (1 or 3) Apache Kafka nodes; use as a context manager."""

    def __init__(
        self,
        base_dir: str | os.PathLike[str],
        nodes: int = 1,
        *,
        transaction_version: int = 2,
        extra_config: dict[str, object] | None = None,
        sasl_ssl: SaslSsl | None = None,
        extra_listeners: dict[str, str] | None = None,
        jvm_options: list[str] | None = None,
    ) -> None:
        if nodes not in (1, 3):
            raise ValueError("a test cluster has 1 or 3 nodes")
        self.base_dir = Path(base_dir)
        self.transaction_version = transaction_version
        self.extra_config = dict(extra_config or {})
        self.sasl_ssl = sasl_ssl
        self.extra_listeners = dict(extra_listeners or {})
        self.jvm_options = list(jvm_options or [])
        self.cluster_id = _random_cluster_id()
        self.nodes = [
            KafkaNode(
                i,
                free_port(),
                free_port(),
                self.base_dir / f"node{i}",
                free_port() if sasl_ssl else 0,
                {name: free_port() for name in self.extra_listeners},
            )
            for i in range(1, nodes + 1)
        ]

    @property
    def bootstrap(self) -> str:
        """`bootstrap.servers` naming every node."""
        return ",".join(node.address for node in self.nodes)

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """`bootstrap.servers` of the SASL_SSL listeners."""
        return ",".join(f"127.0.0.1:{node.sasl_ssl_port}" for node in self.nodes)

    def listener_bootstrap(self, name: str) -> str:
        """`bootstrap.servers` of one of the `extra_listeners`."""
        return ",".join(f"127.0.0.1:{node.extra_ports[name]}" for node in self.nodes)

    @property
    def version(self) -> str:
        return kafka_version()

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT_S) -> KafkaCluster:
        """Format every node's storage, start every node, wait until all are ready."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "log4j2.yaml").write_text(LOG4J2)
        for node in self.nodes:
            node.directory.mkdir(parents=True, exist_ok=True)
            node.config_path.write_text(self._properties(node))
        formats = [self._format(node) for node in self.nodes]
        for node, proc in zip(self.nodes, formats, strict=True):
            output = proc.communicate(timeout=timeout)[0].decode(errors="replace")
            if proc.returncode != 0:
                raise KafkaStartError(f"formatting node {node.node_id} failed:\n{output}")
        for node in self.nodes:
            self._spawn(node)
        self.wait_ready(timeout)
        return self

    def kill(self, node_id: int) -> None:
        """kill -9 of one node (a crash); its data stays."""
        node = self.node(node_id)
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait()

    def restart(self, node_id: int, timeout: float = START_TIMEOUT_S) -> None:
        """Start a stopped or killed node again, on its ports and data; waits for the cluster."""
        node = self.node(node_id)
        if node.is_running():
            raise RuntimeError(f"node {node_id} is running")
        self._spawn(node)
        self.wait_ready(timeout)

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after a grace period)."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node in self.nodes:
            if node.proc is None:
                continue
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- readiness and metadata --------------------------------------------------------------

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until every running node is in the cluster's metadata (raises KafkaStartError)."""
        deadline = time.monotonic() + timeout
        running = {node.node_id for node in self.nodes if node.is_running()}
        while True:
            for node in self.nodes:
                if (
                    node.proc is not None
                    and node.proc.poll() is not None
                    and (node.node_id in running)
                ):
                    raise KafkaStartError(
                        f"Kafka node {node.node_id} exited with {node.proc.returncode}\n"
                        + self.log_text()
                    )
            try:
                if running <= set(self.metadata(timeout=2.0).brokers):
                    return
            except Exception:  # noqa: BLE001 - not up yet; the deadline bounds the wait
                pass
            if time.monotonic() > deadline:
                raise KafkaStartError(f"Kafka cluster not ready in {timeout}s\n" + self.log_text())
            time.sleep(0.3)

    def metadata(self, topic: str | None = None, timeout: float = 10.0):
        """confluent-kafka's ClusterMetadata, asked of the running nodes."""
        from confluent_kafka.admin import AdminClient

        servers = ",".join(node.address for node in self.nodes if node.is_running())
        admin = AdminClient({"bootstrap.servers": servers, "log_level": 0})
        return admin.list_topics(topic, timeout=timeout)

    def leader_of(self, topic: str, partition: int) -> int:
        """The node id that leads `topic`-`partition` now."""
        return self.metadata(topic).topics[topic].partitions[partition].leader

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node id that coordinates `transactional_id` now (FindCoordinator, key type 1,
        asked with onceflow's blocking connection)."""
        from onceflow.client.connection import connect_bootstrap
        from onceflow.client.net.coordinator_lookup import (
            FIND_COORDINATOR_MAX,
            TRANSACTION,
            find_coordinator_request,
            parse_coordinator,
        )
        from onceflow.protocol.api_keys import ApiKey

        servers = ",".join(node.address for node in self.nodes if node.is_running())
        conn = connect_bootstrap(servers)
        try:
            version = min(conn.api_version(ApiKey.FIND_COORDINATOR), FIND_COORDINATOR_MAX)
            request = find_coordinator_request(version, TRANSACTION, transactional_id)
            error, node_id, _host, _port = parse_coordinator(conn.send(request, version), version)
        finally:
            conn.close()
        if error != 0:
            raise RuntimeError(f"FindCoordinator({transactional_id!r}) failed with {error}")
        return node_id

    def log_text(self, tail_lines: int = 200) -> str:
        """The last lines of every node's log, for a failure message."""
        parts = []
        for node in self.nodes:
            lines = node.log_text().splitlines()[-tail_lines:]
            parts.append(f"--- Kafka node {node.node_id} ({node.log_path}) ---")
            parts.extend(lines)
        return "\n".join(parts)

    # -- internals ---------------------------------------------------------------------------

    def _properties(self, node: KafkaNode) -> str:
        count = len(self.nodes)
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        config: dict[str, object] = {
            "process.roles": "broker,controller",
            "node.id": node.node_id,
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.data_dir),
            "default.replication.factor": count,
            "min.insync.replicas": 2 if count == 3 else 1,
            "offsets.topic.replication.factor": count,
            "transaction.state.log.replication.factor": count,
            "transaction.state.log.min.isr": 2 if count == 3 else 1,
            "share.coordinator.state.topic.replication.factor": count,
            "share.coordinator.state.topic.min.isr": 2 if count == 3 else 1,
            # quick tests: few internal partitions, no rebalance delay, short sessions allowed,
            # timed-out transactions aborted within a second or two
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.num.partitions": 4,
            "group.initial.rebalance.delay.ms": 0,
            "group.min.session.timeout.ms": 500,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
        }
        if self.sasl_ssl is not None:
            config.update(self._sasl_ssl_properties(node))
        for name, protocol in self.extra_listeners.items():
            address = f"{name}://127.0.0.1:{node.extra_ports[name]}"
            config["listeners"] = f"{config['listeners']},{address}"
            config["advertised.listeners"] = f"{config['advertised.listeners']},{address}"
            protocols = config["listener.security.protocol.map"]
            config["listener.security.protocol.map"] = f"{protocols},{name}:{protocol}"
        config.update(self.extra_config)
        return "".join(f"{key}={_text(value)}\n" for key, value in config.items())

    def _sasl_ssl_properties(self, node: KafkaNode) -> dict[str, object]:
        assert self.sasl_ssl is not None
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        return {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
            f"CONTROLLER://127.0.0.1:{node.controller_port},"
            f"SASL_SSL://127.0.0.1:{node.sasl_ssl_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
            f"SASL_SSL://127.0.0.1:{node.sasl_ssl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
            "SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.sasl_ssl.keystore,
        }

    def _format(self, node: KafkaNode) -> subprocess.Popen[bytes]:
        cmd = java_command(
            "kafka.tools.StorageTool",
            "format",
            "--config",
            str(node.config_path),
            f"--cluster-id={self.cluster_id}",  # one argument: an id may start with "-"
            "--feature",
            f"transaction.version={self.transaction_version}",
            "--ignore-formatted",
            *self._scram_arguments(),
            heap=["-Xmx256m"],
        )
        return subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

    def _scram_arguments(self) -> list[str]:
        users = self.sasl_ssl.users if self.sasl_ssl is not None else {}
        return [
            f"--add-scram=SCRAM-SHA-512=[name={name},password={password}]"
            for name, password in users.items()
        ]

    def _spawn(self, node: KafkaNode) -> None:
        log4j = self.base_dir / "log4j2.yaml"
        cmd = java_command(
            "kafka.Kafka",
            str(node.config_path),
            heap=[
                *JVM_HEAP,
                f"-Dlog4j2.configurationFile={log4j}",
                "-Djava.awt.headless=true",
                *self.jvm_options,
            ],
        )
        with open(node.log_path, "ab") as log:
            node.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                **child_options(),  # a node dies with the test run that started it
            )


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _random_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
