"""Misuse and unreachable brokers are reported, as Kafka's clients report them: polling with
nothing to read raises IllegalStateError; a bootstrap address nobody listens on is logged at
WARNING (once per interval, not per retry) while `send` waits for metadata."""

from __future__ import annotations

import logging
import socket

import pytest

from onceflow.client import Consumer, Producer
from onceflow.client.errors import IllegalStateError, KafkaTimeoutError


def _dead_address() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("group", [None, "g"])
def test_poll_with_nothing_assigned_or_subscribed_raises(group):
    config = {"bootstrap.servers": _dead_address()}
    if group:
        config["group.id"] = group
    consumer = Consumer(config)
    try:
        for poll in (consumer.poll, consumer.poll_columns):
            with pytest.raises(IllegalStateError, match="not subscribed to any topics"):
                poll(0.1)
        consumer.assign([("t", 0)])
        consumer.unassign()
        with pytest.raises(IllegalStateError):
            consumer.poll(0.1)
    finally:
        consumer.close(1)


def test_dead_bootstrap_is_logged_while_send_waits(caplog):
    address = _dead_address()
    caplog.set_level(logging.DEBUG, logger="onceflow.client")
    with Producer({"bootstrap.servers": address, "max.block.ms": 1500}) as producer:
        with pytest.raises(KafkaTimeoutError):
            producer.send("t", b"v")
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and "could not be established" in r.getMessage()
        and address in r.getMessage()  # not another test's client still retrying
    ]
    assert len(warnings) == 1, warnings  # once, although it retried many times
    assert "refused" in warnings[0].lower()


def test_one_timeout_class_for_every_client(broker):
    """An AdminClient (blocking connection) whose request times out raises the same
    KafkaTimeoutError the producer and consumer raise, so one `except` handles all of them."""
    import onceflow.client
    from onceflow.client.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "request.timeout.ms": 500})
    try:
        admin.list_topics()  # connected
        broker.pause()  # SIGSTOP: the next request gets no answer
        try:
            with pytest.raises(onceflow.client.KafkaTimeoutError) as info:
                admin.list_topics()
        finally:
            broker.resume()
    finally:
        admin.close()
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value, onceflow.client.KafkaError)
