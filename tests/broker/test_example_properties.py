"""docs/examples/broker.properties stays usable: every key in it, commented-out ones included,
is a broker config, and a broker started with it (data directory, listener and metrics port
moved to test values on the command line) runs with the file's settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.broker import BrokerProcess

from onceflow.broker.config import BROKER_CONFIGS, BrokerConfig
from onceflow.client import KafkaTimeoutError, Producer
from onceflow.client.admin import AdminClient, NewTopic
from onceflow.properties import parse_properties

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "broker.properties"
_COMMENTED_KEY = re.compile(r"^#([a-z][a-z0-9.]*)=", re.MULTILINE)


class ExampleBroker(BrokerProcess):
    """A broker started with `--config EXAMPLE` (the flags and --set overrides still win)."""

    def command(self, port: int) -> list[str]:
        return [*super().command(port), "--config", str(EXAMPLE)]


def test_every_key_of_the_example_is_a_broker_config():
    text = EXAMPLE.read_text()
    keys = set(parse_properties(text)) | set(_COMMENTED_KEY.findall(text))
    assert "log.dirs" in keys and "listeners" in keys
    assert keys - set(BROKER_CONFIGS) == set()
    config = BrokerConfig.load(EXAMPLE)  # every value converts and passes the checks
    assert config.unknown_keys == []


@pytest.mark.timeout(120)
def test_a_broker_runs_with_the_example(tmp_path):
    expected = parse_properties(EXAMPLE.read_text())
    broker = ExampleBroker(tmp_path / "data", {"onceflow.metrics.listener": "127.0.0.1:0"})
    try:
        log = broker.log_text()
        assert "unknown config" not in log
        assert "metrics on http://127.0.0.1:" in log
        name = "sized-by-default"
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            admin.create_topics([NewTopic(name)])[name].raise_for_error()  # no partition count
            topic = admin.describe_topics([name])[name]
        assert len(topic.partitions) == int(expected["num.partitions"]) != 1
        assert expected["auto.create.topics.enable"] == "false"
        with Producer({"bootstrap.servers": broker.bootstrap, "max.block.ms": 1000}) as producer:
            with pytest.raises(KafkaTimeoutError):
                producer.send("never-created", b"x")  # the topic is not created on first use
    finally:
        assert broker.stop() == 0
