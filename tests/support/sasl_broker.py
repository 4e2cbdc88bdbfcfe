"""A broker process with a PLAINTEXT listener (setup, as User:ANONYMOUS) and a SASL_PLAINTEXT
one (logins), and a librdkafka check that a SCRAM login works."""

from __future__ import annotations

import re
import time
from pathlib import Path

from support.broker import BrokerProcess

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
LOGIN_TIMEOUT_S = 10.0


def start_sasl_broker(data_dir: Path, **extra_config: object) -> BrokerProcess:
    """Started; `broker.bootstrap` is the PLAINTEXT listener, `broker.sasl_bootstrap` the
    SASL_PLAINTEXT one."""
    broker = BrokerProcess(data_dir, {"listeners": LISTENERS, **extra_config})
    ports = dict(re.findall(r"listener (\w+) \(\w+\) on 127\.0\.0\.1:(\d+)", broker.log_text()))
    broker.sasl_bootstrap = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
    return broker


def scram_config(broker: BrokerProcess, mechanism: str, user: str, password: str) -> dict:
    """confluent-kafka settings for a SCRAM login on the SASL_PLAINTEXT listener."""
    return {
        "bootstrap.servers": broker.sasl_bootstrap,
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def scram_login_works(broker: BrokerProcess, mechanism: str, user: str, password: str) -> bool:
    """Whether a confluent-kafka admin client logs in and reads the cluster's metadata; False
    as soon as librdkafka reports an authentication error."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list = []
    config = scram_config(broker, mechanism, user, password)
    admin = AdminClient({**config, "error_cb": errors.append})
    deadline = time.monotonic() + LOGIN_TIMEOUT_S
    while True:
        try:
            admin.list_topics(timeout=1)
            return True
        except KafkaException:
            admin.poll(0.2)  # serves error_cb
            if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
                return False
            if time.monotonic() > deadline:
                raise
