"""Background tasks of the producer's I/O loop are owned, and their failures surface
(issue 8, defect 3).

An unexpected exception in the task sending a transactional request used to leave that
request marked in flight: no later request went out and every call waited for its timeout
with nothing in the log. Now the failure is logged and the producer fails with it, so the
waiting call (and every later one) raises it. The same holds for the idempotent producer's
InitProducerId task.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from client.client_support import txn_producer
from client.helpers import create_topic
from onceflow.client.errors import KafkaError, KafkaTimeoutError
from onceflow.client.producer import Producer
from onceflow.client.producer.idempotence import TransactionManager
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.client.producer.txn.request import TxnRequestKind
from onceflow.client.producer.txn.sender import TxnRequestSender

# long enough that a call waiting on a stalled producer ends only by this timeout
BLOCK_S = 5


class BrokenNetwork:
    """A network client whose connection lookup hits a bug."""

    async def any_connection(self):
        raise RuntimeError("bug in the network layer")


class NoBatches:
    def has_incomplete(self) -> bool:
        return False


def test_txn_request_task_that_raises_fails_the_producer(caplog):
    txn = TxnManager("tid", 60_000)
    result = txn.begin_init()
    sender = TxnRequestSender(txn, BrokenNetwork(), NoBatches(), 1000, lambda: None)

    async def main():
        sender.run_once()  # FindCoordinator, in a task that raises at once
        for _ in range(5):
            await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert txn.in_flight is None
    assert txn.is_fatal
    with pytest.raises(KafkaError, match="bug in the network layer"):
        result.wait(0)
    with pytest.raises(KafkaError, match="bug in the network layer"):
        txn.begin_init()
    assert "FIND_COORDINATOR for transactional id 'tid' failed unexpectedly" in caplog.text


def test_commit_raises_the_bug_instead_of_stalling(broker, monkeypatch, caplog):
    create_topic(broker.bootstrap, "out", 1)
    original = TxnManager.on_response

    def on_response(self, request, now, error_codes, **fields):
        if request.kind is TxnRequestKind.END_TXN:
            raise RuntimeError("bug handling EndTxn")
        return original(self, request, now, error_codes, **fields)

    monkeypatch.setattr(TxnManager, "on_response", on_response)
    with txn_producer(broker.bootstrap, "bug-tid", **{"max.block.ms": BLOCK_S * 1000}) as p:
        p.init_transactions(BLOCK_S)
        p.begin_transaction()
        p.send("out", b"v").get(BLOCK_S)
        with pytest.raises(KafkaError) as info:
            p.commit_transaction(BLOCK_S)
        assert not isinstance(info.value, KafkaTimeoutError), info.value
        assert "bug handling EndTxn" in str(info.value)
        with pytest.raises(KafkaError, match="bug handling EndTxn"):
            p.begin_transaction()
    assert "END_TXN for transactional id 'bug-tid' failed unexpectedly" in caplog.text


def test_idempotent_init_producer_id_bug_fails_sends(broker, monkeypatch, caplog):
    create_topic(broker.bootstrap, "out", 1)

    def complete_init_producer_id(self, *args, **kwargs):
        raise RuntimeError("bug applying InitProducerId")

    monkeypatch.setattr(TransactionManager, "complete_init_producer_id", complete_init_producer_id)
    with Producer({"bootstrap.servers": broker.bootstrap, "max.block.ms": BLOCK_S * 1000}) as p:
        with pytest.raises(KafkaError) as info:
            p.send("out", b"v").get(BLOCK_S)
        assert not isinstance(info.value, KafkaTimeoutError), info.value
        assert "bug applying InitProducerId" in str(info.value)
    assert "InitProducerId failed unexpectedly" in caplog.text
