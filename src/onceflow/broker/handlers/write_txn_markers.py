"""WriteTxnMarkers handler.

API: WriteTxnMarkers (key 27), versions 1-2.

Behaviour: in Kafka this is the coordinator-to-leader API, also sent by the admin client's
`abortTransaction` (KIP-664) to end a hanging transaction; both need CLUSTER_ACTION. Here the
coordinator writes markers in-process, so a request from a client is answered
CLUSTER_AUTHORIZATION_FAILED for every partition — unless the broker runs with
`onceflow.admin.allow.write.txn.markers=true` and the request comes from a loopback address:
then ABORT markers are written (`TransactionCoordinator.abort_hanging_transaction`: one
control batch per partition as the coordinator, durable before the answer; long-polling
fetches of the partition wake on the log's offsets event), as the `onceflow transactions abort`
command needs. The partition's
producer state still checks the marker: a producer epoch below the partition's is
INVALID_PRODUCER_EPOCH, a coordinator epoch below the recorded one
TRANSACTION_COORDINATOR_FENCED, an unknown partition UNKNOWN_TOPIC_OR_PARTITION. COMMIT
markers from clients are always CLUSTER_AUTHORIZATION_FAILED.

Versions: v1 is the first served (v0 was removed from Kafka's spec); v2 adds
transaction_version (ignored: transaction version 1 markers are written).

Deviations: the authorization is a config switch plus a loopback check, and with the
authorizer on also Kafka's CLUSTER_ACTION on the cluster; only aborts are accepted; the
transaction coordinator's own state of the id is not changed (as in Kafka: the admin abort
only writes the marker).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING

from onceflow.broker.authorization import denied
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.write_txn_markers import WriteTxnMarkersResponse

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext
    from onceflow.broker.state import BrokerState
    from onceflow.protocol.headers import RequestHeader
    from onceflow.protocol.messages.write_txn_markers import WriteTxnMarkersRequest

log = logging.getLogger("onceflow.broker.write_txn_markers")

ALLOW_KEY = "onceflow.admin.allow.write.txn.markers"
_Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
_TopicResult = _Result.WritableTxnMarkerTopicResult
_PartitionResult = _TopicResult.WritableTxnMarkerPartitionResult


def is_loopback_peer(peer: str) -> bool:
    """True when `peer` (`host:port`, as the connection names it) is a loopback address."""
    host = peer.rpartition(":")[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _abort(
    broker: BrokerState, marker: WriteTxnMarkersRequest.WritableTxnMarker, tp: TopicPartition
) -> ErrorCode:
    error = await broker.transactions.coordinator.abort_hanging_transaction(
        tp, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch
    )
    log.log(
        logging.INFO if error == ErrorCode.NONE else logging.WARNING,
        "admin ABORT marker for producer %d epoch %d on %s-%d: %s",
        marker.producer_id,
        marker.producer_epoch,
        tp.topic,
        tp.partition,
        error.name,
    )
    return error


async def handle_write_txn_markers(
    ctx: RequestContext, header: RequestHeader, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    """Write admin ABORT markers when allowed; otherwise refuse every partition."""
    broker = ctx.broker
    allowed = (
        bool(broker.config.get(ALLOW_KEY))
        and is_loopback_peer(ctx.peer)
        and denied(ctx, ApiKey.WRITE_TXN_MARKERS, "cluster") is None
    )
    if not allowed:
        log.info("WriteTxnMarkers from %s refused (CLUSTER_AUTHORIZATION_FAILED)", ctx.peer)
    results = []
    for marker in request.markers:
        topics = []
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                if not allowed or marker.transaction_result:
                    error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                else:
                    error = await _abort(broker, marker, TopicPartition(topic.name, index))
                partitions.append(_PartitionResult(partition_index=index, error_code=error))
            topics.append(_TopicResult(name=topic.name, partitions=partitions))
        results.append(_Result(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)
