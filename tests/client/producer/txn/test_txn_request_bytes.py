"""The bytes of every transactional coordinator request, against a recorded table.

Each scenario of `txn_scenarios` is sent by `TxnRequestSender` on a connection that records
the request (its API, the version chosen and the encoded body) instead of sending it, once to
a broker offering every version the client knows and once to one offering versions <= 1.
`txn_request_bytes.json` is what the client sent before its request handling was restructured
(issue 9): the version caps of transaction version 1 (TxnOffsetCommit <= v4, EndTxn <= v4,
AddPartitionsToTxn <= v3) and every field must survive it. Regenerate deliberately with
`python -m client.producer.txn.test_txn_request_bytes` from tests/.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from client.producer.txn.txn_scenarios import SCENARIOS, assert_matches_recorded, record
from onceflow.client.producer.txn.manager import TxnManager
from onceflow.client.producer.txn.sender import TxnRequestSender
from onceflow.protocol import messages

TABLE = Path(__file__).with_name("txn_request_bytes.json")
BROKERS = {"newest": None, "v1": 1}


class Recorded(OSError):
    """Raised instead of sending: the sender treats it as a lost connection."""


class RecordingConnection:
    def __init__(self, broker_max: int | None):
        self.broker_max = broker_max
        self.sent: list[tuple[str, int, str]] = []

    def api_version(self, api_key: int, max_version: int | None = None) -> int:
        newest = messages.REQUESTS[api_key].VALID_VERSIONS[1]
        caps = [v for v in (newest, self.broker_max, max_version) if v is not None]
        return min(caps)

    async def send(self, request, version=None, *, timeout_s=30.0):
        if version is None:
            version = self.api_version(request.API_KEY)
        try:
            body = b"".join(bytes(part) for part in request.encode_parts(version)).hex()
        except Exception as exc:  # the message cannot be written at this version
            body = f"{type(exc).__name__}: {exc}"
        self.sent.append((request.API_NAME, version, body))
        raise Recorded("recorded")


class RecordingNetwork:
    def __init__(self, conn: RecordingConnection):
        self.conn = conn

    async def any_connection(self):
        return self.conn

    async def coordinator_connection(self, key_type, node_id, host, port):
        return self.conn


class NoBatches:
    def has_incomplete(self) -> bool:
        return False


def _sent(txn: TxnManager, broker_max: int | None) -> list[tuple[str, int, str]]:
    conn = RecordingConnection(broker_max)
    sender = TxnRequestSender(txn, RecordingNetwork(conn), NoBatches(), 1000, lambda: None)

    async def main():
        sender.run_once()
        for _ in range(5):
            await asyncio.sleep(0)

    asyncio.run(main())
    return conn.sent


def current_table() -> dict[str, list]:
    table = {}
    for name, (_kind, setup, _abort) in SCENARIOS.items():
        for broker, broker_max in BROKERS.items():
            txn, _result, _keys = setup()
            table[f"{name} / {broker}"] = [list(sent) for sent in _sent(txn, broker_max)]
    return table


def test_every_request_matches_the_recorded_bytes():
    assert_matches_recorded(TABLE, current_table())


def test_every_request_was_sent():
    assert all(len(sent) == 1 for sent in json.loads(TABLE.read_text()).values())


if __name__ == "__main__":
    record(TABLE, current_table())
