"""Real clients cannot break the internal topics (issue 8, defect 2).

The issue's reproduction: `onceflow topics delete --topic __transaction_state` succeeded and
every later `init_transactions` timed out; `topics create --topic __consumer_offsets` made a
3-partition topic. Here confluent-kafka's AdminClient and Producer and the `onceflow topics`
command try each of those, and transactions still work afterwards.
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from onceflow.cli.main import main

BROKER_CONFIG = {"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3}
INTERNAL = ["__consumer_offsets", "__transaction_state"]


@pytest.fixture
def txn_broker(broker_factory):
    broker = broker_factory(BROKER_CONFIG)
    # make both internal topics exist, as first use does
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "warm-up"})
    p.init_transactions(30)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("warm-up")])["warm-up"].result(
        30
    )
    return broker


def _error_code(future) -> int:
    with pytest.raises(KafkaException) as caught:
        future.result(30)
    return caught.value.args[0].code()


def _transactions_still_work(bootstrap: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "after"})
    p.init_transactions(30)
    p.begin_transaction()
    p.commit_transaction(30)


def test_confluent_admin_is_refused_on_internal_topics(txn_broker):
    admin = AdminClient({"bootstrap.servers": txn_broker.bootstrap})
    for name, future in admin.delete_topics(INTERNAL, operation_timeout=10).items():
        assert _error_code(future) == KafkaError.INVALID_REQUEST, name
    created = admin.create_topics([NewTopic(name, 3, 1) for name in INTERNAL])
    for name, future in created.items():
        assert _error_code(future) == KafkaError.INVALID_REQUEST, name
    grown = admin.create_partitions([NewPartitions(name, 10) for name in INTERNAL])
    for name, future in grown.items():
        assert _error_code(future) == KafkaError.INVALID_REQUEST, name
    described = admin.list_topics(timeout=10).topics
    assert {name: len(described[name].partitions) for name in INTERNAL} == {
        name: 3 for name in INTERNAL
    }
    _transactions_still_work(txn_broker.bootstrap)


def test_confluent_producer_cannot_write_to_internal_topics(txn_broker):
    reports = []
    p = Producer({"bootstrap.servers": txn_broker.bootstrap, "retries": 0})
    for name in INTERNAL:
        p.produce(name, b"garbage", partition=0, on_delivery=lambda err, _msg: reports.append(err))
    assert p.flush(30) == 0
    assert [err.code() for err in reports] == [KafkaError.TOPIC_EXCEPTION] * 2
    _transactions_still_work(txn_broker.bootstrap)


def test_topics_command_refuses_internal_topics(txn_broker, capsys):
    b = ("--bootstrap-server", txn_broker.bootstrap)
    code = main(["topics", "delete", *b, "--topic", "__transaction_state"])
    _, err = capsys.readouterr()
    assert code != 0
    assert "Deletion of internal topic __transaction_state is prohibited." in err
    code = main(["topics", "create", *b, "--topic", "__consumer_offsets", "--partitions", "3"])
    _, err = capsys.readouterr()
    assert code != 0
    assert "Creation of internal topic __consumer_offsets is prohibited." in err
    _transactions_still_work(txn_broker.bootstrap)
