"""Producer ids bound to principals (issue 10 item 6, stricter than Kafka): bob copies alice's
producer id and epoch (transactional and idempotent) into his own crafted Produce,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn requests and is refused, one
log line each, with every log (end offsets and bytes, `__transaction_state`,
`__consumer_offsets`), the coordinator's state, the owners file and the group's offsets
unchanged; alice's transaction then commits. With the switch off the same requests are
accepted, as Kafka accepts them. The authorizer is off: the binding does not depend on ACLs.
(The restart and torn-record cases run against a broker process:
tests/faults/test_fault_producer_binding.py.)"""

from __future__ import annotations

import asyncio
import hashlib
import logging

from broker.broker_helpers import make_batch, open_state, partition_results, produce_request
from broker.test_authz_txn import (
    add_partitions,
    add_partitions_errors,
    as_,
    committed_offsets,
    open_alices_transaction,
    snapshot,
    txn_batch,
)
from broker.test_broker_group_offsets import txn_commit_request
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from onceflow.protocol.messages.end_txn import EndTxnRequest
from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest
from onceflow.security.producer_id_owners import FILE_NAME

ALICE, BOB = "User:alice", "User:bob"
TXN_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CLUSTER_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
SWITCH = "onceflow.producer.id.principal.binding.enable"


def open_binding_state(tmp_path, **overrides):
    state = open_state(
        tmp_path / "data",
        **{
            "transaction.state.log.num.partitions": 3,
            "offsets.topic.num.partitions": 3,
            **overrides,
        },
    )
    assert state.logs.create_topic("t", 2).error == ErrorCode.NONE
    return state


def idempotent_batch(pid, seq, epoch=0):
    return make_batch([b"i%d" % seq], producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def alices_idempotent_producer(state):
    """Alice's idempotent producer id, with its first batch on t-1."""
    init = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    response = await as_(state, ALICE, ApiKey.INIT_PRODUCER_ID, 4, init)
    assert response.error_code == 0
    pid = response.producer_id
    response = await as_(
        state, ALICE, ApiKey.PRODUCE, 9, produce_request("t", {1: idempotent_batch(pid, 0)})
    )
    assert partition_results(response)[("t", 1)].error_code == 0
    return pid


async def bobs_requests(state, pid, epoch, idempotent_pid):
    """Bob's crafted requests with alice's ids: (what, answer) pairs, in order."""
    results = []
    for tid in ("tx", None):
        request = produce_request("t", {0: txn_batch(pid, epoch, seq=1)})
        request.transactional_id = tid
        response = await as_(state, BOB, ApiKey.PRODUCE, 9, request)
        results.append(
            (f"transactional Produce tid={tid}", partition_results(response)[("t", 0)].error_code)
        )
    for what, producer_id, seq in (
        ("idempotent Produce", idempotent_pid, 1),
        ("idempotent Produce, txn id", pid, 0),
    ):
        request = produce_request(
            "t", {1: idempotent_batch(producer_id, seq, epoch if producer_id == pid else 0)}
        )
        response = await as_(state, BOB, ApiKey.PRODUCE, 9, request)
        results.append((what, partition_results(response)[("t", 1)].error_code))
    response = await as_(state, BOB, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(pid, epoch))
    results.append(("AddPartitionsToTxn", add_partitions_errors(response)))
    add_offsets = AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=pid, producer_epoch=epoch, group_id="g"
    )
    response = await as_(state, BOB, ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets)
    results.append(("AddOffsetsToTxn", response.error_code))
    request = txn_commit_request(3, pid, epoch, {("t", 0): 99})
    response = await as_(state, BOB, ApiKey.TXN_OFFSET_COMMIT, 3, request)
    results.append(("TxnOffsetCommit", response.topics[0].partitions[0].error_code))
    for committed in (True, False):
        end = EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=committed
        )
        response = await as_(state, BOB, ApiKey.END_TXN, 3, end)
        results.append((f"EndTxn committed={committed}", response.error_code))
    return results


REFUSED = [
    ("transactional Produce tid=tx", TXN_FAILED),
    ("transactional Produce tid=None", TXN_FAILED),
    ("idempotent Produce", CLUSTER_FAILED),
    ("idempotent Produce, txn id", CLUSTER_FAILED),
    ("AddPartitionsToTxn", {TXN_FAILED}),
    ("AddOffsetsToTxn", TXN_FAILED),
    ("TxnOffsetCommit", TXN_FAILED),
    ("EndTxn committed=True", TXN_FAILED),
    ("EndTxn committed=False", TXN_FAILED),
]


def owners_file_digest(state) -> str:
    path = f"{state.config.data_dir}/{FILE_NAME}"
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_another_principals_producer_id_is_refused_and_changes_nothing(tmp_path, caplog):
    state = open_binding_state(tmp_path)

    async def scenario():
        state.load_coordinators()
        pid, epoch = await open_alices_transaction(state)
        idempotent_pid = await alices_idempotent_producer(state)
        offsets = await committed_offsets(state)
        before = (snapshot(state), owners_file_digest(state))
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="onceflow.broker"):
            assert await bobs_requests(state, pid, epoch, idempotent_pid) == REFUSED
        lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(lines) == len(REFUSED), lines
        assert all("User:bob" in line and "test-peer" in line for line in lines), lines
        assert (snapshot(state), owners_file_digest(state)) == before
        assert await committed_offsets(state) == offsets
        # alice carries on: her idempotent producer's next batch, then her commit
        request = produce_request("t", {1: idempotent_batch(idempotent_pid, 1)})
        response = await as_(state, ALICE, ApiKey.PRODUCE, 9, request)
        assert partition_results(response)[("t", 1)].error_code == 0
        end = EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True
        )
        assert (await as_(state, ALICE, ApiKey.END_TXN, 3, end)).error_code == 0
        await state.transactions.coordinator.wait_for_completions()
        log = state.get_log("t", 0)
        assert log.last_stable_offset == log.log_end_offset == 2  # her batch and the marker
        await state.close()

    asyncio.run(scenario())


def test_with_the_switch_off_bobs_requests_are_accepted_as_kafka_does(tmp_path):
    state = open_binding_state(tmp_path, **{SWITCH: False})

    async def scenario():
        state.load_coordinators()
        pid, epoch = await open_alices_transaction(state)
        idempotent_pid = await alices_idempotent_producer(state)
        results = dict(await bobs_requests(state, pid, epoch, idempotent_pid))
        # Kafka's answers: bob's batches are appended (the second is a duplicate of the
        # first: NONE), his offsets staged, and his commit ends alice's transaction (his abort
        # then finds it completing or complete)
        ending = results.pop("EndTxn committed=False")
        assert ending in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.INVALID_TXN_STATE)
        assert results == {
            "transactional Produce tid=tx": ErrorCode.NONE,
            "transactional Produce tid=None": ErrorCode.NONE,
            "idempotent Produce": ErrorCode.NONE,
            "idempotent Produce, txn id": ErrorCode.NONE,
            "AddPartitionsToTxn": {ErrorCode.NONE},
            "AddOffsetsToTxn": ErrorCode.NONE,
            "TxnOffsetCommit": ErrorCode.NONE,
            "EndTxn committed=True": ErrorCode.NONE,
        }
        await state.transactions.coordinator.wait_for_completions()
        assert await committed_offsets(state) == {("t", 0): 99}  # bob's offset, committed
        assert state.get_log("t", 0).log_end_offset == 3  # alice's batch, bob's, the marker
        await state.close()

    asyncio.run(scenario())


def test_the_caller_of_init_producer_id_takes_a_transactional_id_over(tmp_path):
    """Another principal allowed to initialise the transactional id fences alice and owns
    the producer id from then on: alice's old id and epoch are bob's now."""
    state = open_binding_state(tmp_path)

    async def scenario():
        state.load_coordinators()
        pid, epoch = await open_alices_transaction(state)
        end = EndTxnRequest(
            transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True
        )
        assert (await as_(state, ALICE, ApiKey.END_TXN, 3, end)).error_code == 0
        await state.transactions.coordinator.wait_for_completions()
        init = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
        response = await as_(state, BOB, ApiKey.INIT_PRODUCER_ID, 4, init)
        assert (response.error_code, response.producer_id) == (0, pid)
        new_epoch = response.producer_epoch
        assert state.producer_id_binding.owners.owner(pid) == BOB
        response = await as_(
            state, ALICE, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(pid, new_epoch)
        )
        assert add_partitions_errors(response) == {TXN_FAILED}
        response = await as_(
            state, BOB, ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(pid, new_epoch)
        )
        assert add_partitions_errors(response) == {ErrorCode.NONE}
        await state.close()

    asyncio.run(scenario())


def test_unauthenticated_producers_write_no_owner_file(tmp_path):
    state = open_binding_state(tmp_path)

    async def scenario():
        init = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
        response = await as_(state, "User:ANONYMOUS", ApiKey.INIT_PRODUCER_ID, 4, init)
        assert response.error_code == 0
        assert not (tmp_path / "data" / FILE_NAME).exists()
        # and an authenticated client cannot use an anonymous producer's id either
        batch = idempotent_batch(response.producer_id, 0)
        response = await as_(state, BOB, ApiKey.PRODUCE, 9, produce_request("t", {0: batch}))
        assert partition_results(response)[("t", 0)].error_code == CLUSTER_FAILED
        await state.close()

    asyncio.run(scenario())
