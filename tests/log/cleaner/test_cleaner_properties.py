"""Property: compaction never changes what a reader concludes, only how much it reads.

Random workloads (plain keyed records, tombstones, an idempotent producer that retries,
transactional producers that commit or abort, a transaction left open) are appended to two
logs, one compacted at random points (cleaning rounds interleaved with the appends, tombstone
horizons expiring), one never compacted (the oracle). For read_committed the latest value per
key is the oracle's; for read_uncommitted it is the oracle's or, where the oracle's latest
record belongs to an aborted transaction, the oracle's view without aborted records (the
cleaner removes aborted records, as Kafka's does). The idempotent producer then resumes with
its next sequence, on the live log and after a restart without producer-state snapshots (the
state rebuilt from the cleaned log alone: the empty batch headers), and is never answered
OUT_OF_ORDER_SEQUENCE_NUMBER; a retry of its last batch is still recognised as a duplicate.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.cleaner.cleaner_helpers import (
    compacted_manager,
    end_txn,
    keyed_batch,
    read_view,
)
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode
from onceflow.records.compression import CompressionType

IDEMPOTENT_PID = 1
TXN_PIDS = (10, 11)
KEYS = [b"key-%d" % i for i in range(12)]

_op = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), st.booleans()),
    st.tuples(st.just("idempotent"), st.sampled_from(KEYS), st.booleans()),
    st.tuples(st.just("retry"), st.just(b""), st.just(False)),
    st.tuples(st.just("txn"), st.sampled_from(KEYS), st.sampled_from(TXN_PIDS)),
    st.tuples(st.just("end"), st.sampled_from(TXN_PIDS), st.booleans()),
    st.tuples(st.just("clean"), st.just(b""), st.just(False)),
)


class Workload:
    """Applies ops to the compacted log and the oracle alike."""

    def __init__(self, logs, cleaner, compressed: bool) -> None:
        self.logs = logs  # (compacted, oracle)
        self.cleaner = cleaner
        self.codec = CompressionType.ZSTD if compressed else CompressionType.NONE
        self.seq = 0
        self.last_idempotent: bytearray | None = None
        self.last_keys: list[bytes] = []
        self.open: set[int] = set()
        self.count = 0
        self.now = 10_000

    def _value(self, tombstone: bool) -> bytes | None:
        self.count += 1
        return None if tombstone else b"value-%d" % self.count

    def _append(self, batch, **kwargs) -> list:
        results = [log.append(bytearray(batch), now_ms=self.now, **kwargs) for log in self.logs]
        for log in self.logs:
            log.flush()
        return results

    def apply(self, op) -> None:
        kind, a, b = op
        self.now += 1_000
        if kind == "put":
            self._append(keyed_batch([(a, self._value(b))], compression=self.codec))
        elif kind == "idempotent":
            batch = keyed_batch(
                [(a, self._value(b)), (a + b"x", b"x")],
                pid=IDEMPOTENT_PID,
                epoch=0,
                seq=self.seq,
                compression=self.codec,
            )
            results = self._append(batch)
            assert all(r.error == ErrorCode.NONE for r in results), results
            self.seq += 2
            self.last_idempotent = batch
            self.last_keys = [a, a + b"x"]
        elif kind == "retry" and self.last_idempotent is not None:
            results = self._append(self.last_idempotent)
            assert all(r.error == ErrorCode.NONE and r.duplicate for r in results), results
        elif kind == "txn":
            self.open.add(b)
            results = self._append(keyed_batch([(a, self._value(False))], pid=b, epoch=0, txn=True))
            assert all(r.error == ErrorCode.NONE for r in results), results
        elif kind == "end" and a in self.open:
            self.open.discard(a)
            for log in self.logs:
                assert end_txn(log, a, 0, abort=b).error == ErrorCode.NONE
                log.flush()
        elif kind == "clean":
            self.cleaner.clean_log(self.logs[0], now_ms=self.now)


def _check_views(compacted, oracle) -> None:
    assert read_view(compacted, committed=True) == read_view(oracle, committed=True)
    seen = read_view(compacted, committed=False)
    raw = read_view(oracle, committed=False)
    without_aborted = read_view(oracle, committed=False, drop_aborted=True)
    for key in set(seen) | set(raw) | set(without_aborted):
        assert seen.get(key) in (raw.get(key), without_aborted.get(key)), key


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(_op, min_size=20, max_size=120), compressed=st.booleans())
def test_compaction_keeps_every_readers_view(tmp_path_factory, ops, compressed):
    path = tmp_path_factory.mktemp("cleaner")
    manager = compacted_manager(path / "compacted")
    oracle_manager = LogManager(str(path / "oracle"), {})
    oracle_manager.start()
    oracle_manager.create_topic("c", 1)
    compacted, oracle = manager.get_log("c", 0), oracle_manager.get_log("c", 0)
    workload = Workload((compacted, oracle), manager.cleaner, compressed)
    for op in ops:
        workload.apply(op)
        if op[0] == "clean":
            _check_views(compacted, oracle)
    for key in workload.last_keys:  # supersede the idempotent producer's last records
        workload.apply(("put", key, False))
    for _ in range(30):  # roll them out of the active segment
        workload.apply(("put", b"filler", False))
    for _ in range(2):  # a last round, then one more so tombstone horizons pass
        workload.now += 1_000
        manager.cleaner.clean_log(compacted, now_ms=workload.now)
    _check_views(compacted, oracle)

    # the idempotent producer resumes: after cleaning, and after a restart
    def resume(log) -> None:
        batch = keyed_batch(
            [(b"resume", b"%d" % workload.seq)], pid=IDEMPOTENT_PID, epoch=0, seq=workload.seq
        )
        result = log.append(batch, now_ms=workload.now)
        assert result.error == ErrorCode.NONE, result
        log.flush()
        workload.seq += 1

    if workload.last_idempotent is not None:
        retry = compacted.append(bytearray(workload.last_idempotent), now_ms=workload.now)
        assert retry.error == ErrorCode.NONE and retry.duplicate
    manager.close()
    for snapshot in (path / "compacted" / "c-0").glob("*.snapshot"):
        snapshot.unlink()  # producer state must come back from the cleaned log alone
    manager = compacted_manager(path / "compacted")
    if workload.last_idempotent is not None:
        restarted = manager.get_log("c", 0)
        # its records are cleaned away, its header is not: a retry is still a duplicate
        retry = restarted.append(bytearray(workload.last_idempotent), now_ms=workload.now)
        assert retry.error == ErrorCode.NONE and retry.duplicate, retry
        resume(restarted)
    manager.close()
    oracle_manager.close()
