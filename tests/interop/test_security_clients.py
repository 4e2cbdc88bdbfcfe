"""Real clients over TLS and SASL against one onceflow broker process: confluent-kafka
(librdkafka), kafka-python, aiokafka and kcat each connect over SASL_SSL with SCRAM-SHA-512
and with PLAIN, over SASL_PLAINTEXT with SCRAM-SHA-256, and over mutual TLS; each produces
records and reads them back. A wrong password fails with the client's authentication error
and the broker keeps serving the others. confluent-kafka re-authenticates (KIP-368) before a
session with a lifetime expires.

The broker has four listeners (PLAINTEXT for setup, SSL with ssl.client.auth=requested,
SASL_PLAINTEXT, SASL_SSL) and its first user from onceflow.sasl.bootstrap.users.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import uuid

import pytest
from support.secure_broker import (
    CASE_IDS,
    CASES,
    PASSWORD,
    USER,
    start_secure_broker,
)
from support.secure_broker import address as _address
from support.secure_broker import confluent_config as _librdkafka_config

pytestmark = pytest.mark.timeout(120)

RECORDS = [b"record-%d" % i for i in range(5)]
KCAT = shutil.which("kcat")


def _topic() -> str:
    return f"secure-{uuid.uuid4().hex[:8]}"


# -- confluent-kafka -----------------------------------------------------------------------


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=CASE_IDS)
def test_confluent_kafka_round_trip(secure_broker, pki, listener, mechanism):
    from confluent_kafka import Consumer, Producer, TopicPartition

    config = _librdkafka_config(secure_broker, pki, listener, mechanism)
    topic = _topic()
    producer = Producer(config)
    for value in RECORDS:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    while len(values) < len(RECORDS):
        message = consumer.poll(20)
        assert message is not None and message.error() is None, message and message.error()
        values.append(message.value())
    consumer.close()
    assert values == RECORDS


def test_confluent_kafka_wrong_password_is_an_authentication_error(secure_broker, pki):
    from confluent_kafka import KafkaError, Producer

    errors = []
    config = _librdkafka_config(secure_broker, pki, "SASL_SSL", "SCRAM-SHA-512", "wrong")
    producer = Producer({**config, "error_cb": errors.append})
    for _ in range(20):
        producer.poll(0.5)
        if errors:
            break
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert "failed authentication from 127.0.0.1" in secure_broker.log_text()
    # the broker serves others meanwhile
    test_confluent_kafka_round_trip(secure_broker, pki, "SASL_SSL", "PLAIN")


# -- kafka-python ----------------------------------------------------------------------------


def _kafka_python_config(broker, pki, listener, mechanism, password=PASSWORD) -> dict:
    config = {
        "bootstrap_servers": _address(broker, listener),
        "security_protocol": listener,
        "request_timeout_ms": 30_000,
    }
    if listener.endswith("SSL"):
        config["ssl_cafile"] = pki.ca
    if mechanism is None:
        config["ssl_certfile"] = pki.path("client.crt")
        config["ssl_keyfile"] = pki.path("client.key")
    else:
        config.update(
            {
                "sasl_mechanism": mechanism,
                "sasl_plain_username": USER,
                "sasl_plain_password": password,
            }
        )
    return config


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=CASE_IDS)
def test_kafka_python_round_trip(secure_broker, pki, listener, mechanism):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    config = _kafka_python_config(secure_broker, pki, listener, mechanism)
    topic = _topic()
    producer = KafkaProducer(**config, enable_idempotence=False, acks="all")
    for value in RECORDS:
        producer.send(topic, value, partition=0)
    producer.flush(30)
    producer.close(10)
    consumer = KafkaConsumer(**config, group_id=None, enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = []
    for _ in range(20):
        for records in consumer.poll(timeout_ms=1000).values():
            values += [r.value for r in records]
        if len(values) >= len(RECORDS):
            break
    consumer.close()
    assert values == RECORDS


def test_kafka_python_wrong_password_is_an_authentication_error(secure_broker, pki):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    config = _kafka_python_config(secure_broker, pki, "SASL_SSL", "PLAIN", "wrong")
    # kafka-python 3 reports a failed bootstrap (KafkaTimeoutError); the cause is in its log
    with pytest.raises(KafkaError):
        KafkaProducer(**config, enable_idempotence=False, max_block_ms=5000).partitions_for("x")
    assert "with PLAIN: invalid username or password for 'alice'" in secure_broker.log_text()


# -- aiokafka --------------------------------------------------------------------------------


def _aiokafka_config(broker, pki, listener, mechanism, password=PASSWORD) -> dict:
    from aiokafka.helpers import create_ssl_context

    config = {"bootstrap_servers": _address(broker, listener), "security_protocol": listener}
    if listener.endswith("SSL"):
        certificate = {}
        if mechanism is None:
            certificate = {"certfile": pki.path("client.crt"), "keyfile": pki.path("client.key")}
        config["ssl_context"] = create_ssl_context(cafile=pki.ca, **certificate)
    if mechanism is not None:
        config.update(
            {
                "sasl_mechanism": mechanism,
                "sasl_plain_username": USER,
                "sasl_plain_password": password,
            }
        )
    return config


async def _aiokafka_round_trip(config: dict, topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(**config, acks="all")
    await producer.start()
    try:
        for value in RECORDS:
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(**config, enable_auto_commit=False)
    await consumer.start()
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        await consumer.seek_to_beginning(partition)
        values = []
        while len(values) < len(RECORDS):
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
            for records in batch.values():
                values += [r.value for r in records]
        return values
    finally:
        await consumer.stop()


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=CASE_IDS)
def test_aiokafka_round_trip(secure_broker, pki, listener, mechanism):
    config = _aiokafka_config(secure_broker, pki, listener, mechanism)
    assert asyncio.run(_aiokafka_round_trip(config, _topic())) == RECORDS


def test_aiokafka_wrong_password_is_an_authentication_error(secure_broker, pki):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def attempt():
        config = _aiokafka_config(secure_broker, pki, "SASL_SSL", "SCRAM-SHA-512", "wrong")
        producer = AIOKafkaProducer(**config, request_timeout_ms=5000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    # aiokafka reports a failed bootstrap (KafkaConnectionError); the cause is in its log
    with pytest.raises(KafkaError):
        asyncio.run(attempt())
    assert "with SCRAM-SHA-512: Invalid client credentials: 'alice'" in secure_broker.log_text()


# -- kcat ------------------------------------------------------------------------------------


def _kcat(broker, pki, listener, mechanism, *args, stdin=None, password=PASSWORD):
    config = _librdkafka_config(broker, pki, listener, mechanism, password)
    cmd = [KCAT, "-b", config.pop("bootstrap.servers")]
    for key, value in config.items():
        cmd += ["-X", f"{key}={value}"]
    return subprocess.run([*cmd, *args], input=stdin, capture_output=True, timeout=60)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=CASE_IDS)
def test_kcat_round_trip(secure_broker, pki, listener, mechanism):
    topic = _topic()
    lines = b"".join(value + b"\n" for value in RECORDS)
    produced = _kcat(secure_broker, pki, listener, mechanism, "-P", "-t", topic, "-p", "0",
                     stdin=lines)  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = _kcat(secure_broker, pki, listener, mechanism, "-C", "-t", topic, "-p", "0",
                     "-o", "beginning", "-e", "-q")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout == lines


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_wrong_password_fails(secure_broker, pki):
    result = _kcat(secure_broker, pki, "SASL_SSL", "PLAIN", "-L", "-m", "5", password="wrong")
    assert result.returncode != 0
    assert b"Authentication failed" in result.stderr or b"authentication" in result.stderr.lower()


# -- KIP-368 re-authentication --------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_reauthenticates_before_the_session_expires(tmp_path, pki, mechanism):
    """librdkafka (>= 2.2) re-authenticates on the same connection when SaslAuthenticate v1+
    gives the session a lifetime: producing across several lifetimes never loses the connection
    to an expired session, and every record arrives."""
    import time

    from confluent_kafka import Producer

    broker = start_secure_broker(tmp_path / "data", pki, **{"connections.max.reauth.ms": "1500"})
    try:
        config = _librdkafka_config(broker, pki, "SASL_SSL", mechanism)
        errors = []
        producer = Producer({**config, "error_cb": errors.append})
        topic, delivered = _topic(), []

        def on_delivery(error, message):
            delivered.append(error or message.value())

        deadline = time.monotonic() + 5  # more than three session lifetimes
        sent = 0
        while time.monotonic() < deadline:
            producer.produce(topic, b"r%d" % sent, on_delivery=on_delivery)
            sent += 1
            producer.poll(0.1)
        assert producer.flush(30) == 0
        assert delivered == [b"r%d" % i for i in range(sent)]
        assert errors == []
        log = broker.log_text()
    finally:
        broker.stop()
    assert "session expired" not in log
