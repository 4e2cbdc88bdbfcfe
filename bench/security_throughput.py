"""Cost of security: SASL_SSL vs PLAINTEXT, and the ACL authorizer with 10 000 ACLs vs none.

Makes a CA and a server certificate for 127.0.0.1 with `openssl` in a temporary directory,
then starts two `onceflow broker` child processes (default configuration: acks=all appends
are fsynced by group commit):

- broker `open`: a PLAINTEXT and a SASL_SSL listener, no authorizer, one SCRAM-SHA-512 user
  from `onceflow.sasl.bootstrap.users`;
- broker `acls`: one PLAINTEXT listener, the authorizer on (`authorizer.class.name`) with
  `--acls` ACLs stored in its data directory before it starts (the file CreateAcls writes):
  LITERAL and PREFIXED, ALLOW and DENY, on topics (many prefix lengths, some on the bench's
  topic names for other principals), groups and transactional ids, for 50 principals, among
  them the producing principal's own (`User:ANONYMOUS`: CREATE, WRITE, DELETE on PREFIXED
  `bench-`).

Then, for `--rounds` rounds, rotating which mode goes first, each mode produces `--bytes` of
1 KiB records to a fresh 3-partition topic with confluent-kafka (acks=all, as
broker_throughput.py) and, for `plaintext` and `sasl_ssl`, reads them back (assign, from the
beginning); the topic is deleted after. Modes:

- `plaintext`: broker `open`, PLAINTEXT listener (also the authorizer-off baseline);
- `sasl_ssl`: broker `open`, SASL_SSL listener, SCRAM-SHA-512;
- `acls`: broker `acls`, PLAINTEXT listener, produce only.

Each run records MB/s and the broker's CPU seconds per MB. Because the authorizer's effect is
far below this machine's noise, its cost is also given as a steady figure: the ACL checks of
one Produce request timed in process (`authorization.denied_names` with the same ACLs), times
the Produce requests per MB the broker counted (its metrics listener), over the broker's CPU
per MB on PLAINTEXT. The ratios are of the median MB/s:
sasl_ssl / plaintext (target >= 0.8 for produce and consume) and acls / plaintext (target
>= 0.95). The TLS version and cipher are reported twice: as Python's `ssl` negotiates them on a
probe connection, and as librdkafka (the client measured) negotiates them with the broker's
TLS context.

Appends the run to bench/results/security_throughput.json and prints one line.

    .venv/bin/python bench/security_throughput.py                     # 3 rounds x 256 MiB
    .venv/bin/python bench/security_throughput.py --rounds 5 --bytes 128MiB
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

from broker_throughput import append_result, consume, machine, parse_size
from confluent_kafka import Producer
from idempotence_cost import broker_cpu_seconds, produce_run

from onceflow.broker.authorization import denied_names
from onceflow.broker.config import BrokerConfig
from onceflow.broker.tls import server_context
from onceflow.cli.embedded_broker import EmbeddedBroker
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.protocol.api_keys import ApiKey
from onceflow.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from onceflow.security.acl_store import AclStore
from onceflow.security.authorizer import AclAuthorizer

RESULTS = Path(__file__).parent / "results" / "security_throughput.json"
MODES = ("plaintext", "sasl_ssl", "acls")
TARGET_TLS_RATIO = 0.8
TARGET_ACL_RATIO = 0.95
USER, PASSWORD = "bench", "bench-secret"
PRODUCER_PRINCIPAL = "User:ANONYMOUS"  # PLAINTEXT clients
TOPIC_PREFIX = "bench-"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# operations that make sense per resource type
OPERATIONS = {
    ResourceType.TOPIC: [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE],
    ResourceType.GROUP: [AclOperation.READ, AclOperation.DESCRIBE],
    ResourceType.TRANSACTIONAL_ID: [AclOperation.WRITE, AclOperation.DESCRIBE],
}
HOSTS = ["*", "*", "10.0.0.1", "10.0.0.2"]


# -- certificates ------------------------------------------------------------------------------


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path) -> tuple[str, str]:
    """(CA file, server keystore: certificate + key in one PEM) for 127.0.0.1."""
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl(directory, "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=bench-ca")  # fmt: skip
    (directory / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    _openssl(directory, "req", *key, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost")  # fmt: skip
    _openssl(directory, "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey",
             "ca.key", "-CAcreateserial", "-out", "server.crt", "-days", "2",
             "-extfile", "server.ext")  # fmt: skip
    keystore = directory / "server.pem"
    pem = (directory / "server.crt").read_text() + (directory / "server.key").read_text()
    keystore.write_text(pem)
    return str(directory / "ca.crt"), str(keystore)


def probe_tls(port: int, ca: str) -> dict[str, object]:
    """The TLS version and cipher Python's `ssl` negotiates with the listener."""
    context = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            name, _protocol, bits = tls.cipher()
            return {"version": tls.version(), "cipher": name, "bits": bits}


def librdkafka_tls(ca: str, keystore: str) -> dict[str, object]:
    """The TLS version and cipher librdkafka negotiates with the broker's own server context
    (`broker.tls.server_context`), seen from a one-connection server in this process: librdkafka
    logs neither."""
    context = server_context(BrokerConfig({"ssl.keystore.location": keystore}))
    seen: dict[str, object] = {}
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(15)

        def accept() -> None:
            try:
                raw, _ = listener.accept()
                with context.wrap_socket(raw, server_side=True) as tls:
                    name, _protocol, bits = tls.cipher()
                    seen.update(version=tls.version(), cipher=name, bits=bits)
            except OSError as exc:
                seen["error"] = str(exc)

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        port = listener.getsockname()[1]
        producer = Producer(
            {
                "bootstrap.servers": f"127.0.0.1:{port}",
                "security.protocol": "SSL",
                "ssl.ca.location": ca,
                "log_level": 0,
            }
        )
        thread.join(15)
        del producer
    return seen


# -- ACLs --------------------------------------------------------------------------------------


def _name(rng: random.Random, low: int, high: int) -> str:
    return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz-.", k=rng.randint(low, high)))


def bench_acls(count: int, seed: int) -> list[AclBinding]:
    """`count` ACLs of 50 principals plus the producing principal's own (see the docstring)."""
    rng = random.Random(seed)
    principals = [f"User:user{i}" for i in range(50)]
    own = [
        AclBinding(
            ResourcePattern(ResourceType.TOPIC, TOPIC_PREFIX, PatternType.PREFIXED),
            AccessControlEntry(PRODUCER_PRINCIPAL, "*", operation, PermissionType.ALLOW),
        )
        for operation in (AclOperation.CREATE, AclOperation.WRITE, AclOperation.DELETE)
    ]
    acls: set[AclBinding] = set(own)
    types = list(OPERATIONS)
    while len(acls) < count:
        resource_type = types[len(acls) % 3] if rng.random() < 0.5 else ResourceType.TOPIC
        prefixed = rng.random() < 0.5
        if resource_type is ResourceType.TOPIC and rng.random() < 0.02:
            # other principals' ACLs on the bench's topics: the lookup finds and checks them
            name = f"{TOPIC_PREFIX}{rng.choice(MODES)}-"[: rng.randint(1, 12)]
        else:
            name = _name(rng, 3, 20) if prefixed else _name(rng, 5, 40)
        acls.add(
            AclBinding(
                ResourcePattern(
                    resource_type, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL
                ),
                AccessControlEntry(
                    rng.choice(principals),
                    rng.choice(HOSTS),
                    rng.choice(OPERATIONS[resource_type]),
                    PermissionType.DENY if rng.random() < 0.2 else PermissionType.ALLOW,
                ),
            )
        )
    return sorted(acls, key=str)


def authorization_us(acls: list[AclBinding], topic: str, repeats: int = 7) -> dict[str, float]:
    """Microseconds of the ACL checks of one Produce request to `topic` by the producing
    principal (`authorization.denied_names`, as `handle_produce` calls it), in process: with
    the bench's ACLs, and with the authorizer off; medians of `repeats` passes."""
    calls = 20_000
    timings: dict[str, list[float]] = {"acls": [], "off": []}
    for name, authorizer in (("acls", AclAuthorizer(acls)), ("off", None)):
        ctx = SimpleNamespace(
            broker=SimpleNamespace(authorizer=authorizer),
            principal=PRODUCER_PRINCIPAL,
            client_host="127.0.0.1",
        )
        if authorizer is not None and denied_names(ctx, ApiKey.PRODUCE, "topic", [topic]):
            raise RuntimeError(f"the bench's ACLs do not let {PRODUCER_PRINCIPAL} write {topic}")
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(calls):
                denied_names(ctx, ApiKey.PRODUCE, "topic", (topic,))
            timings[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(values) for name, values in timings.items()}


# -- runs --------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Brokers:
    """The two brokers and each mode's client settings."""

    def __init__(self, workdir: Path, args: argparse.Namespace):
        ca, keystore = make_certificates(workdir)
        self.ca, self.keystore = ca, keystore
        plain_port, tls_port = free_port(), free_port()
        self.tls_port = tls_port
        self.metrics_ports = {"open": free_port(), "acls": free_port()}
        self.open = EmbeddedBroker(
            workdir / "open",
            30,
            settings={
                "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SASL_SSL://127.0.0.1:{tls_port}",
                "ssl.keystore.location": keystore,
                "ssl.client.auth": "none",
                "onceflow.sasl.bootstrap.users": f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]",
                "onceflow.metrics.listener": f"127.0.0.1:{self.metrics_ports['open']}",
            },
        )
        self.acls = None
        try:
            acls = bench_acls(args.acls, args.seed)
            self.acl_list = acls
            self.acl_count = len(acls)
            (workdir / "acls" / "data").mkdir(parents=True)
            AclStore(str(workdir / "acls" / "data")).save(acls)
            self.acls = EmbeddedBroker(
                workdir / "acls",
                30,
                settings={
                    "authorizer.class.name": AUTHORIZER,
                    "onceflow.metrics.listener": f"127.0.0.1:{self.metrics_ports['acls']}",
                },
            )
        except BaseException:
            self.stop()
            raise
        self.sasl_ssl = {
            "bootstrap.servers": f"127.0.0.1:{tls_port}",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": USER,
            "sasl.password": PASSWORD,
            "ssl.ca.location": ca,
        }

    def mode(self, mode: str) -> tuple[EmbeddedBroker, dict[str, object]]:
        """(broker, client settings with bootstrap.servers) of a mode."""
        if mode == "sasl_ssl":
            return self.open, dict(self.sasl_ssl)
        broker = self.acls if mode == "acls" else self.open
        return broker, {"bootstrap.servers": f"127.0.0.1:{broker.port}"}

    def produce_requests(self, mode: str) -> int:
        """Produce requests the mode's broker has received so far (its metrics)."""
        port = self.metrics_ports["acls" if mode == "acls" else "open"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        found = re.search(r'^onceflow_requests_total\{api="PRODUCE"\} (\d+)', text, re.M)
        return int(found.group(1)) if found else 0

    def stop(self) -> None:
        for broker in (self.open, self.acls):
            if broker is not None:
                broker.stop()


def run_mode(brokers: Brokers, mode: str, topic: str, args) -> dict[str, dict[str, float]]:
    """Create `topic`, produce to it (and read it back, except in `acls`), delete it."""
    broker, settings = brokers.mode(mode)
    pid = broker.proc.pid
    with AdminClient(settings) as admin:
        admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].raise_for_error()
        client = {k: v for k, v in settings.items() if k != "bootstrap.servers"}
        producer = {**client, "linger.ms": args.linger_ms, "batch.size": args.batch_size}
        requests_before = brokers.produce_requests(mode)
        result = {"produce": produce_run(settings["bootstrap.servers"], topic, producer, args, pid)}
        produced_mb = result["produce"]["records"] * args.record_size / 1e6
        requests = brokers.produce_requests(mode) - requests_before
        result["produce"]["produce_requests_per_mb"] = requests / produced_mb
        if mode != "acls":
            cpu_before = broker_cpu_seconds(pid)
            records = int(result["produce"]["records"])
            consumed = consume(settings["bootstrap.servers"], args, records, topic, client)
            mb = consumed["bytes"] / 1e6
            consumed["broker_cpu_ms_per_mb"] = (broker_cpu_seconds(pid) - cpu_before) * 1000 / mb
            # the ratio is of the MB/s after the first records: the start (connect, TLS and
            # SASL handshakes, offsets, first fetch) is reported as first_records_s
            consumed["mb_per_s"], consumed["mb_per_s_with_start"] = (
                consumed.pop("steady_mb_per_s"),
                consumed["mb_per_s"],
            )
            result["consume"] = consumed
        admin.delete_topics([topic])[topic].raise_for_error()
    return result


def median_of(runs: list[dict], direction: str, key: str) -> float:
    return statistics.median(r[direction][key] for r in runs)


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """The produce/consume load's options, shared with security_side_by_side.py."""
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bytes", type=parse_size, default=256 << 20, help="per run")
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="consume time bound / 2")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_load_arguments(parser)
    parser.add_argument("--acls", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="onceflow-security-bench-"))
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    try:
        brokers = Brokers(workdir, args)
        try:
            tls = {
                "python_ssl": probe_tls(brokers.tls_port, brokers.ca),
                "librdkafka": librdkafka_tls(brokers.ca, brokers.keystore),
            }
            print(f"TLS: {tls}", flush=True)
            for round_index in range(args.rounds):
                shift = round_index % len(MODES)
                for mode in MODES[shift:] + MODES[:shift]:
                    topic = f"{TOPIC_PREFIX}{mode}-{round_index}"
                    result = run_mode(brokers, mode, topic, args)
                    runs[mode].append(result)
                    line = ", ".join(
                        f"{direction} {r['mb_per_s']:6.1f} MB/s "
                        f"({r['broker_cpu_ms_per_mb']:.2f} ms broker CPU/MB)"
                        for direction, r in result.items()
                    )
                    print(f"round {round_index} {mode:>9}: {line}", flush=True)
        finally:
            brokers.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    median = {
        mode: {
            f"{direction}_{key}": median_of(runs[mode], direction, key)
            for direction in runs[mode][0]
            for key in ("mb_per_s", "broker_cpu_ms_per_mb")
        }
        for mode in MODES
    }
    ratios = {
        "sasl_ssl_produce": median["sasl_ssl"]["produce_mb_per_s"]
        / median["plaintext"]["produce_mb_per_s"],
        "sasl_ssl_consume": median["sasl_ssl"]["consume_mb_per_s"]
        / median["plaintext"]["consume_mb_per_s"],
        "acls_produce": median["acls"]["produce_mb_per_s"]
        / median["plaintext"]["produce_mb_per_s"],
    }
    checks_us = authorization_us(brokers.acl_list, f"{TOPIC_PREFIX}acls-0")
    requests_per_mb = statistics.median(
        r["produce"]["produce_requests_per_mb"] for r in runs["acls"]
    )
    # broker CPU is read in 10 ms ticks: a tiny run may show none
    broker_us_per_mb = 1000 * median["plaintext"]["produce_broker_cpu_ms_per_mb"]
    extra_us_per_mb = (checks_us["acls"] - checks_us["off"]) * requests_per_mb
    acl_cpu_share = extra_us_per_mb / broker_us_per_mb if broker_us_per_mb else None
    authorization = {
        "us_per_produce_request": checks_us,
        "produce_requests_per_mb": requests_per_mb,
        "share_of_broker_cpu_per_mb": acl_cpu_share,
    }
    targets_met = {
        "sasl_ssl_produce": ratios["sasl_ssl_produce"] >= TARGET_TLS_RATIO,
        "sasl_ssl_consume": ratios["sasl_ssl_consume"] >= TARGET_TLS_RATIO,
        "acls_produce": ratios["acls_produce"] >= TARGET_ACL_RATIO,
    }
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    mbps = {m: median[m]["produce_mb_per_s"] for m in MODES}
    summary = (
        f"{now} SASL_SSL/PLAINTEXT produce {ratios['sasl_ssl_produce']:.2f}x "
        f"({mbps['sasl_ssl']:.0f} vs {mbps['plaintext']:.0f} MB/s), consume "
        f"{ratios['sasl_ssl_consume']:.2f}x ({median['sasl_ssl']['consume_mb_per_s']:.0f} vs "
        f"{median['plaintext']['consume_mb_per_s']:.0f} MB/s), target >= {TARGET_TLS_RATIO}; "
        f"{tls['python_ssl']['version']} {tls['python_ssl']['cipher']}; authorizer with "
        f"{brokers.acl_count} ACLs / off: produce {ratios['acls_produce']:.3f}x "
        f"({mbps['acls']:.0f} MB/s), target >= {TARGET_ACL_RATIO}; ACL checks "
        f"{checks_us['acls']:.1f} us (off: {checks_us['off']:.1f}) per Produce x "
        f"{requests_per_mb:.2f} requests/MB = "
        f"{'n/a' if acl_cpu_share is None else f'{acl_cpu_share:.2%}'} of the broker's CPU/MB; "
        f"medians of {args.rounds} "
        f"rounds x {args.bytes >> 20} MiB; load {load_before[0]:.1f} before"
    )
    run = {
        "date": now,
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "config": {
            "rounds": args.rounds,
            "bytes_per_run": args.bytes,
            "record_size": args.record_size,
            "partitions": args.partitions,
            "acks": "all",
            "linger_ms": args.linger_ms,
            "batch_size": args.batch_size,
            "sasl_mechanism": "SCRAM-SHA-512",
            "acls": brokers.acl_count,
            "broker": "default config (fsync on acks=all via group commit), subprocess",
            "client": "confluent-kafka " + __import__("confluent_kafka").version()[0],
            "order": "rotating: round r starts with mode r mod 3",
        },
        "tls": tls,
        "runs": runs,
        "median": median,
        "ratios": ratios,
        "authorization": authorization,
        "targets": {
            "sasl_ssl_produce": TARGET_TLS_RATIO,
            "sasl_ssl_consume": TARGET_TLS_RATIO,
            "acls_produce": TARGET_ACL_RATIO,
        },
        "targets_met": targets_met,
        "summary": summary,
    }
    append_result(args.out, run)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
