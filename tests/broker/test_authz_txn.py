"""Authorization of the transactional APIs (issue 10 item 5): a principal without the ACL gets
Kafka's error, and the logs (every partition's end offset and bytes, `__transaction_state`,
`__consumer_offsets`), the transaction coordinator's state and the group's offsets are
unchanged afterwards; an unauthorized client cannot open a transaction that holds back the
last stable offset."""

from __future__ import annotations

import asyncio
import hashlib
import os

from broker.authz_helpers import ADMIN, ALICE, MALLORY, creation, grant, open_authz_state
from broker.broker_helpers import call, make_batch, partition_results, produce_request
from broker.test_broker_group_offsets import commit_request, txn_commit_request
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from onceflow.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from onceflow.protocol.messages.end_txn import EndTxnRequest
from onceflow.protocol.messages.find_coordinator import FindCoordinatorRequest
from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest
from onceflow.protocol.messages.offset_fetch import OffsetFetchRequest
from onceflow.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from onceflow.security.acl import AclOperation, ResourceType

_Op = AclOperation
_R = ResourceType
_AddTopic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
TXN_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
BOB = "User:bob"  # WRITE on the transactional id only


def open_txn_state(tmp_path):
    state = open_authz_state(
        tmp_path / "data",
        **{
            "transaction.state.log.num.partitions": 3,
            "offsets.topic.num.partitions": 3,
            "onceflow.admin.allow.write.txn.markers": True,
        },
    )
    assert state.logs.create_topic("t", 2).error == ErrorCode.NONE
    assert state.logs.create_topic("secret", 1).error == ErrorCode.NONE
    grant(
        state,
        creation(_R.TRANSACTIONAL_ID, "tx", _Op.WRITE),
        creation(_R.TOPIC, "t", _Op.ALL),
        creation(_R.GROUP, "g", _Op.READ),
        creation(_R.TRANSACTIONAL_ID, "tx", _Op.WRITE, principal=BOB),
    )
    return state


def snapshot(state) -> dict:
    """Everything a denied request must leave as it was."""
    logs = {log.name: log.log_end_offset for log in state.logs.all_logs()}
    files = {}
    for root, _, names in os.walk(state.config.data_dir):
        for name in names:
            if name.endswith(".log"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    files[path] = hashlib.sha256(f.read()).hexdigest()
    metadata = state.transactions.coordinator.get("tx")
    txn = (
        metadata.state,
        metadata.producer_id,
        metadata.producer_epoch,
        sorted(metadata.topic_partitions),
    )
    return {"leo": logs, "files": files, "txn": txn}


async def as_(state, principal, api_key, version, request, peer="test-peer"):
    return await call(state, api_key, version, request, principal=principal, peer=peer)


async def committed_offsets(state):
    request = OffsetFetchRequest(group_id="g", topics=None, require_stable=False)
    response = await as_(state, ADMIN, ApiKey.OFFSET_FETCH, 5, request)
    return {
        (t.name, p.partition_index): p.committed_offset
        for t in response.topics
        for p in t.partitions
    }


def txn_batch(pid, epoch, seq=0):
    return make_batch(
        [b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )


async def open_alices_transaction(state):
    """Alice commits offset 5 for the group, then opens a transaction on t-0 with offsets."""
    find = FindCoordinatorRequest(key="tx", key_type=1)
    assert (await as_(state, ALICE, ApiKey.FIND_COORDINATOR, 3, find)).error_code == 0
    find_group = FindCoordinatorRequest(key="g", key_type=0)
    assert (await as_(state, ALICE, ApiKey.FIND_COORDINATOR, 3, find_group)).error_code == 0
    commit = commit_request("g", {("t", 0): (5, "")})
    response = await as_(state, ALICE, ApiKey.OFFSET_COMMIT, 8, commit)
    assert response.topics[0].partitions[0].error_code == 0
    init = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
    response = await as_(state, ALICE, ApiKey.INIT_PRODUCER_ID, 4, init)
    assert response.error_code == 0
    pid, epoch = response.producer_id, response.producer_epoch
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[_AddTopic(name="t", partitions=[0])],
    )
    response = await as_(state, ALICE, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add)
    assert (
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    )
    request = produce_request("t", {0: txn_batch(pid, epoch)})
    request.transactional_id = "tx"
    response = await as_(state, ALICE, ApiKey.PRODUCE, 9, request)
    assert partition_results(response)[("t", 0)].error_code == 0
    add_offsets = AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    assert (await as_(state, ALICE, ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)).error_code == 0
    return pid, epoch


def add_partitions(pid, epoch, topic="t", partition=1):
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[_AddTopic(name=topic, partitions=[partition])],
    )


def add_partitions_errors(response):
    return {
        p.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


def markers(pid, epoch):
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    topic = marker.WritableTxnMarkerTopic(name="t", partition_indexes=[0])
    return WriteTxnMarkersRequest(
        markers=[
            marker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=False,
                coordinator_epoch=0,
                topics=[topic],
            )
        ]
    )


async def denied_requests(state, pid, epoch):
    """Each transactional API as a principal without its ACL: (what, error) pairs."""
    results = []
    find = FindCoordinatorRequest(key="tx", key_type=1)
    results.append(
        (
            "FindCoordinator",
            (await as_(state, MALLORY, ApiKey.FIND_COORDINATOR, 3, find)).error_code,
            TXN_FAILED,
        )
    )
    init = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
    results.append(
        (
            "InitProducerId",
            (await as_(state, MALLORY, ApiKey.INIT_PRODUCER_ID, 4, init)).error_code,
            TXN_FAILED,
        )
    )
    response = await as_(
        state, MALLORY, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(pid, epoch)
    )
    results.append(("AddPartitionsToTxn", add_partitions_errors(response), {TXN_FAILED}))
    response = await as_(
        state, BOB, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(pid, epoch, "secret", 0)
    )
    results.append(
        (
            "AddPartitionsToTxn topic",
            add_partitions_errors(response),
            {ErrorCode.TOPIC_AUTHORIZATION_FAILED},
        )
    )
    add_offsets = AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    results.append(
        (
            "AddOffsetsToTxn",
            (await as_(state, MALLORY, ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)).error_code,
            TXN_FAILED,
        )
    )
    results.append(
        (
            "AddOffsetsToTxn group",
            (await as_(state, BOB, ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)).error_code,
            ErrorCode.GROUP_AUTHORIZATION_FAILED,
        )
    )
    for who, expected in ((MALLORY, TXN_FAILED), (BOB, ErrorCode.GROUP_AUTHORIZATION_FAILED)):
        request = txn_commit_request(3, pid, epoch, {("t", 0): 99})
        response = await as_(state, who, ApiKey.TXN_OFFSET_COMMIT, 3, request)
        results.append(("TxnOffsetCommit", response.topics[0].partitions[0].error_code, expected))
    for tid in ("tx", None):
        request = produce_request("t", {0: txn_batch(pid, epoch, seq=1), 1: txn_batch(pid, epoch)})
        request.transactional_id = tid
        response = await as_(state, MALLORY, ApiKey.PRODUCE, 9, request)
        codes = {p.error_code for p in partition_results(response).values()}
        results.append((f"Produce tid={tid}", codes, {TXN_FAILED}))
    for committed in (True, False):
        end = EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=committed
        )
        results.append(
            ("EndTxn", (await as_(state, MALLORY, ApiKey.END_TXN, 3, end)).error_code, TXN_FAILED)
        )
    response = await as_(
        state, MALLORY, ApiKey.WRITE_TXN_MARKERS, 1, markers(pid, epoch), peer="127.0.0.1:5000"
    )
    code = response.markers[0].topics[0].partitions[0].error_code
    results.append(("WriteTxnMarkers", code, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    return results


def test_denied_transactional_requests_change_nothing(tmp_path):
    state = open_txn_state(tmp_path)

    async def scenario():
        state.load_coordinators()
        pid, epoch = await open_alices_transaction(state)
        offsets = await committed_offsets(state)
        assert offsets == {("t", 0): 5}
        before = snapshot(state)
        results = await denied_requests(state, pid, epoch)
        for what, got, expected in results:
            assert got == expected, what
        after = snapshot(state)
        assert after == before
        assert await committed_offsets(state) == offsets
        # alice's transaction is intact: she commits it, and the LSO passes her records
        end = EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True
        )
        assert (await as_(state, ALICE, ApiKey.END_TXN, 3, end)).error_code == 0
        await state.transactions.coordinator.wait_for_completions()
        log = state.get_log("t", 0)
        assert log.last_stable_offset == log.log_end_offset
        await state.close()

    asyncio.run(scenario())


def test_an_unauthorized_client_cannot_open_a_transaction(tmp_path):
    """Mallory may write t but has no transactional id: her transactional batch (without a
    transactional id, so KIP-890 verification does not apply) is refused, and the last stable
    offset keeps up with the log for read_committed consumers."""
    state = open_txn_state(tmp_path)
    grant(state, creation(_R.TOPIC, "t", _Op.WRITE, principal=MALLORY))

    async def scenario():
        log = state.get_log("t", 0)
        request = produce_request("t", {0: txn_batch(4242, 0)})
        response = await as_(state, MALLORY, ApiKey.PRODUCE, 9, request)
        assert partition_results(response)[("t", 0)].error_code == TXN_FAILED
        plain = produce_request("t", {0: make_batch([b"ok"])})
        response = await as_(state, MALLORY, ApiKey.PRODUCE, 9, plain)
        assert partition_results(response)[("t", 0)].error_code == 0
        assert log.log_end_offset == 1 and log.last_stable_offset == 1
        await state.close()

    asyncio.run(scenario())
