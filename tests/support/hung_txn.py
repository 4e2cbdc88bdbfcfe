"""A deliberately hung transaction, for the tests of the tools that find and abort one.

`hang_a_transaction` produces one plain record and then a transactional batch with a producer id
no coordinator knows, in a Produce request without a transactional id (so the broker does not
verify it, as in Kafka): offsets 0 and 1 of partition 0, and the partition's last stable offset
stays at 1 until the transaction is aborted with WriteTxnMarkers. Needs a broker without the
authorizer (with it, a transactional batch without a transactional id is refused). Apache Kafka
4.x refuses such a batch whatever the authorizer (KIP-890's verification); `open_transaction`
gives the tools an ordinary open transaction to abort there.
"""

from __future__ import annotations

from onceflow.client.connection import BrokerConnection
from onceflow.client.producer import Producer
from onceflow.protocol.messages.list_offsets import ListOffsetsRequest
from onceflow.protocol.messages.produce import ProduceRequest
from onceflow.records.builder import BatchBuilder

HUNG_PRODUCER_ID = 777_000


def hang_a_transaction(bootstrap: str, topic: str) -> None:
    """One plain record, then a transactional batch no coordinator knows: offsets 0 and 1."""
    plain = BatchBuilder()
    plain.append(None, None, b"plain")
    hung = BatchBuilder(
        producer_id=HUNG_PRODUCER_ID, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    hung.append(None, None, b"hung")
    with BrokerConnection.from_address(bootstrap) as conn:
        for batch in (plain.build(), hung.build()):
            partition = ProduceRequest.TopicProduceData.PartitionProduceData
            request = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=5000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic, partition_data=[partition(index=0, records=bytes(batch))]
                    )
                ],
            )
            (result,) = conn.send(request).responses[0].partition_responses
            assert result.error_code == 0


def open_transaction(bootstrap: str, topic: str, transactional_id: str, records: int) -> Producer:
    """A producer with an open transaction of `records` records on partition 0 of `topic`
    (offsets from the partition's end), flushed; the caller closes it."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(records):
        producer.send(topic, f"open-{i}".encode(), partition=0)
    producer.flush(timeout=30)
    return producer


def last_stable_offset(bootstrap: str, topic: str) -> int:
    """ListOffsets(latest) with read_committed isolation: the partition's LSO."""
    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    with BrokerConnection.from_address(bootstrap) as conn:
        request = ListOffsetsRequest(
            replica_id=-1,
            isolation_level=1,
            topics=[
                topic_cls(
                    name=topic,
                    partitions=[topic_cls.ListOffsetsPartition(partition_index=0, timestamp=-1)],
                )
            ],
        )
        (partition,) = conn.send(request).topics[0].partitions
    return partition.offset
