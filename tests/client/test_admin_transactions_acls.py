"""The AdminClient's transaction APIs (KIP-664: describe transactions and producers, abort a
transaction on a partition) on onceflow, Apache Kafka TV2 and TV1, and its ACL APIs on a
onceflow broker and a Kafka node, each running Kafka's StandardAuthorizer."""

from __future__ import annotations

import time

import pytest
from security.acl_helpers import allow, binding_filter
from support.kafka_cluster import KafkaCluster
from support.peers import KAFKA_TV2, ONCEFLOW

from onceflow.client.admin import AdminClient, NewTopic, OffsetSpec, TopicPartition
from onceflow.client.consumer import Consumer
from onceflow.client.errors import SecurityDisabledError
from onceflow.client.producer import Producer
from onceflow.client.txn_admin import AbortTransactionSpec
from onceflow.protocol.errors import ErrorCode
from onceflow.security.acl import ANY_BINDING, AclOperation, PatternType, ResourceType

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


def _wait(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def _read_committed(bootstrap: str, tp: TopicPartition) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"})
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        values = []
        for _ in range(5):
            values += [r.value for r in consumer.poll(0.5)]
        return values
    finally:
        consumer.close()


def test_describe_a_transaction_its_producer_then_abort_it(peer):
    topic, tid = peer.name("txn-admin"), peer.name("tid")
    tp = TopicPartition(topic, 0)
    with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].raise_for_error()
        _wait(lambda: admin.describe_topics([topic])[topic].error_code == ErrorCode.NONE)
        with Producer({"bootstrap.servers": peer.bootstrap}) as plain:
            plain.send(topic, b"before", partition=0)
            plain.flush(30)
        producer = Producer({"bootstrap.servers": peer.bootstrap, "transactional.id": tid})
        try:
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.send(topic, b"open", partition=0)
            producer.flush(30)

            described = admin.describe_transactions([tid, peer.name("unknown")])
            txn = described[tid]
            assert (txn.error_code, txn.state) == (ErrorCode.NONE, "Ongoing")
            assert txn.producer_id == producer.producer_id and txn.partitions == (tp,)
            assert txn.transaction_start_time_ms > 0
            unknown = described[peer.name("unknown")].error_code
            assert unknown == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

            result = admin.describe_producers([tp, TopicPartition(peer.name("nope"), 0)])
            assert result[TopicPartition(peer.name("nope"), 0)].error_code != ErrorCode.NONE
            (open_txn,) = [p for p in result[tp].producers if p.producer_id == producer.producer_id]
            assert open_txn.current_txn_start_offset == 1

            lso = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=1)[tp].offset
            assert lso == 1  # the open transaction holds read_committed readers back
            spec = AbortTransactionSpec(
                tp, open_txn.producer_id, open_txn.producer_epoch,
                max(0, open_txn.coordinator_epoch),
            )  # fmt: skip
            assert admin.abort_transaction(spec) == ErrorCode.NONE
            _wait(
                lambda: (
                    admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=1)[tp].offset
                    == admin.list_offsets({tp: OffsetSpec.latest()})[tp].offset
                )
            )
            assert _read_committed(peer.bootstrap, tp) == [b"before"]
        finally:
            producer.close(timeout=0)


@pytest.fixture(scope="module", params=[ONCEFLOW, pytest.param(KAFKA_TV2, marks=pytest.mark.kafka)])
def acl_bootstrap(request, tmp_path_factory):
    """A broker with Kafka's StandardAuthorizer, the test's anonymous client a super user."""
    base = tmp_path_factory.mktemp("acl-admin")
    if request.param == ONCEFLOW:
        from support.broker import BrokerProcess

        broker = BrokerProcess(base / "data", AUTHORIZER)
        yield broker.bootstrap
        broker.stop()
        return
    cluster = KafkaCluster(base, 1, extra_config=AUTHORIZER)
    cluster.start()
    try:
        yield cluster.bootstrap
    finally:
        cluster.stop()


def test_describe_transactions_of_many_ids_in_batches(peer):
    """More ids than one DescribeTransactions request carries (`BATCH_IDS`), spread over
    the coordinator's partitions, some unknown: each answered, in the order asked."""
    from onceflow.client.connection import BrokerConnection
    from onceflow.client.txn_admin import BATCH_IDS
    from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest

    tids = [peer.name(f"many-{i}") for i in range(BATCH_IDS + 30)]
    with BrokerConnection.from_address(peer.bootstrap).connect() as conn:
        for tid in tids:
            init = InitProducerIdRequest(
                transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1,
                producer_epoch=-1,
            )  # fmt: skip
            for _ in range(100):  # the coordinator may still be loading
                response = conn.send(init, 4)
                if response.error_code == ErrorCode.NONE:
                    break
                time.sleep(0.1)
            assert response.error_code == ErrorCode.NONE
    unknown = [peer.name("unknown-a"), peer.name("unknown-b")]
    asked = [unknown[0], *reversed(tids), unknown[1]]
    with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        described = admin.describe_transactions(asked)
    assert list(described) == asked
    assert {described[t].error_code for t in unknown} == {ErrorCode.TRANSACTIONAL_ID_NOT_FOUND}
    for tid in tids:
        d = described[tid]
        assert (d.transactional_id, d.error_code, d.state) == (tid, ErrorCode.NONE, "Empty")
        assert d.producer_id >= 0 and d.transaction_timeout_ms == 60_000


def test_create_describe_delete_acls(acl_bootstrap):
    alice = allow(AclOperation.READ, "orders", host="*")
    bob = allow(AclOperation.WRITE, "ord", pattern_type=PatternType.PREFIXED, principal="User:bob")
    bad = allow(AclOperation.READ, "x", pattern_type=PatternType.MATCH)  # a filter value
    with AdminClient({"bootstrap.servers": acl_bootstrap}) as admin:
        with pytest.raises(ValueError, match="filter value"):
            admin.create_acls([alice, bad])
        results = admin.create_acls([alice, bob])
        assert [r.error_code for r in results] == [ErrorCode.NONE, ErrorCode.NONE]
        _wait(lambda: {alice, bob} <= set(admin.describe_acls(ANY_BINDING)))

        matching = binding_filter(ResourceType.TOPIC, "orders", PatternType.MATCH)
        assert set(admin.describe_acls(matching)) == {alice, bob}
        only_bob = binding_filter(principal="User:bob")
        (deleted,) = admin.delete_acls([only_bob])
        assert deleted.result.ok and deleted.bindings == (bob,)
        _wait(lambda: set(admin.describe_acls(ANY_BINDING)) == {alice})
        admin.delete_acls([ANY_BINDING])


@pytest.mark.parametrize(  # ACLs do not depend on the transaction version
    "peer", [ONCEFLOW, pytest.param(KAFKA_TV2, marks=pytest.mark.kafka)], indirect=True
)
def test_acls_without_an_authorizer_are_security_disabled(peer):
    with AdminClient({"bootstrap.servers": peer.bootstrap}) as admin:
        with pytest.raises(SecurityDisabledError):
            admin.describe_acls(ANY_BINDING)
        (result,) = admin.create_acls([allow(AclOperation.READ)])
        assert result.error_code == ErrorCode.SECURITY_DISABLED
