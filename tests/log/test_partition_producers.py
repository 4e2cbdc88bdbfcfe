"""PartitionLog with producer state: idempotent appends, duplicates, transactions, LSO, the
aborted-transaction index, and the Hypothesis model of the 5-batch window."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.log_helpers import make_batch, open_log, record_values
from log.producer_helpers import marker, producer_batch
from onceflow.log.config import LogConfig
from onceflow.log.producer_state import AppendOrigin
from onceflow.log.txn_index import ENTRY_SIZE, AbortedTxn
from onceflow.protocol.errors import ErrorCode

COORDINATOR = AppendOrigin.COORDINATOR


def test_idempotent_appends_and_duplicate_answer_original_offsets(tmp_path):
    log = open_log(tmp_path)
    first = log.append(producer_batch(7, 0, 0, 3, tag=b"a"))
    second = log.append(producer_batch(7, 0, 3, 2, tag=b"b"))
    assert (first.base_offset, second.base_offset) == (0, 3)
    retry = log.append(producer_batch(7, 0, 0, 3, tag=b"a"))
    assert retry.error == ErrorCode.NONE and retry.duplicate
    assert (retry.base_offset, retry.last_offset, retry.next_offset) == (0, 2, 3)
    assert retry.log_append_time == -1
    assert log.log_end_offset == 5
    log.flush()
    assert record_values(log.read(0, 1 << 20).records) == [b"a-0", b"a-1", b"a-2", b"b-0", b"b-1"]
    assert log.live_producer_count == 1


def test_duplicate_on_log_append_time_topic_reports_the_original_time(tmp_path):
    log = open_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    log.append(producer_batch(7, 0, 0), now_ms=5_000)
    retry = log.append(producer_batch(7, 0, 0), now_ms=9_000)
    assert retry.duplicate and retry.log_append_time == 5_000


def test_rejected_batch_writes_nothing_and_keeps_state(tmp_path):
    log = open_log(tmp_path)
    log.append(producer_batch(7, 1, 0, 2))
    before = log.active_producers()
    size = log.active_segment.size
    for batch, error in (
        (producer_batch(7, 1, 5), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
        (producer_batch(7, 0, 2), ErrorCode.INVALID_PRODUCER_EPOCH),
        (producer_batch(7, 2, 3), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ):
        result = log.append(batch)
        assert result.error == error and not result.duplicate
        assert result.error_message and error.name in result.error_message
    # a record set whose second batch fails leaves even its first batch out
    result = log.append(producer_batch(7, 1, 2) + producer_batch(7, 1, 9))
    assert result.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2 and log.active_segment.size == size
    assert log.active_producers() == before


def test_batches_without_producer_id_bypass_producer_state(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(2))
    log.append(make_batch(2))  # the same bytes again are not a duplicate
    assert log.log_end_offset == 4 and log.live_producer_count == 0


def test_client_control_batch_is_rejected(tmp_path):
    log = open_log(tmp_path)
    assert log.append(marker(7, 0, abort=True)).error == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 0


def test_lso_follows_open_transactions(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(2))  # 0-1
    log.append(producer_batch(1, 0, 0, 2, txn=True))  # 2-3, txn of pid 1
    log.append(producer_batch(2, 0, 0, 1, txn=True))  # 4, txn of pid 2
    log.append(make_batch(1))  # 5
    assert log.last_stable_offset == 0  # capped by the high watermark (nothing flushed)
    log.flush()
    assert log.high_watermark == 6 and log.last_stable_offset == 2
    assert log.append(marker(1, 0, abort=False), origin=COORDINATOR).base_offset == 6
    log.flush()
    assert log.last_stable_offset == 4
    assert log.append(marker(2, 0, abort=False), origin=COORDINATOR).error == ErrorCode.NONE
    assert log.last_stable_offset == 7  # the high watermark again (marker 7 not flushed)
    log.flush()
    assert log.last_stable_offset == log.high_watermark == 8
    assert log.collect_aborted_transactions(0, 8) == []


def test_lso_is_at_least_the_log_start_offset(tmp_path):
    log = open_log(tmp_path)
    log.append(producer_batch(1, 0, 0, 2, txn=True))
    log.append(make_batch(3))
    log.flush()
    assert log.last_stable_offset == 0
    log.delete_records(3)
    assert log.last_stable_offset == 3


def test_log_start_offset_through_transactions_keeps_state_index_and_lso(tmp_path):
    # Kafka (UnifiedLog.maybeIncrementLogStartOffset): producer state stays, the first
    # unstable offset is clamped to the new start until the open transaction's marker lands
    config = LogConfig(retention_ms=-1)  # timestamps are from 1970: no time retention
    log = open_log(tmp_path, config)
    log.append(producer_batch(1, 0, 0, 2, txn=True))  # 0-1: producer 1, left open
    log.append(producer_batch(2, 0, 0, 2, txn=True))  # 2-3: producer 2, aborted below
    log.append(marker(2, 0, abort=True), origin=COORDINATOR)  # 4
    log.append(make_batch(2))  # 5-6
    log.flush()
    assert log.last_stable_offset == 0
    assert log.delete_records(3) == (ErrorCode.NONE, 3)

    def check(current):
        assert current.log_start_offset == 3
        assert current.last_stable_offset == 3  # producer 1's transaction is still open
        assert current.collect_aborted_transactions(3, 7) == [(2, 2)]  # offset 3 is aborted
        producers = {p.producer_id: p for p in current.active_producers()}
        assert producers[1].current_txn_start_offset == 0
        # producer 1 continues its sequence; a retry of its first batch is still a duplicate
        assert current.append(producer_batch(1, 0, 0, 2, txn=True)).duplicate

    check(log)
    reopened = open_log(tmp_path, config)  # no close: as after kill -9
    check(reopened)
    assert reopened.append(producer_batch(1, 0, 2, 1, txn=True)).base_offset == 7
    reopened.append(marker(1, 0, abort=False), origin=COORDINATOR)  # 8
    reopened.flush()
    assert reopened.last_stable_offset == reopened.high_watermark == 9


def test_abort_marker_writes_txnindex_and_collect_finds_it(tmp_path):
    log = open_log(tmp_path)
    log.append(producer_batch(1, 0, 0, 2, txn=True))  # 0-1
    log.append(producer_batch(2, 0, 0, 1, txn=True))  # 2
    log.append(marker(1, 0, abort=True, coordinator_epoch=5), origin=COORDINATOR)  # 3
    log.append(producer_batch(3, 0, 0, 1, txn=True))  # 4
    log.append(marker(3, 0, abort=True), origin=COORDINATOR)  # 5
    log.append(marker(2, 0, abort=False), origin=COORDINATOR)  # 6: commit, not indexed
    index = log.active_segment.txn_index
    assert index.entries == [AbortedTxn(1, 0, 3, 2), AbortedTxn(3, 4, 5, 2)]
    import os

    assert os.path.getsize(index.path) == 2 * ENTRY_SIZE
    assert log.collect_aborted_transactions(0, 7) == [(1, 0), (3, 4)]
    assert log.collect_aborted_transactions(4, 7) == [(3, 4)]
    assert log.collect_aborted_transactions(0, 1) == [(1, 0)]
    assert log.collect_aborted_transactions(6, 7) == []
    assert log.active_producers()[0].coordinator_epoch == 5


def test_stale_coordinator_epoch_and_producer_epoch_on_markers(tmp_path):
    log = open_log(tmp_path)
    log.append(producer_batch(1, 2, 0, 1, txn=True))
    log.append(marker(1, 2, abort=False, coordinator_epoch=4), origin=COORDINATOR)
    log.append(producer_batch(1, 2, 1, 1, txn=True))
    end = log.log_end_offset
    stale = log.append(marker(1, 2, abort=True, coordinator_epoch=3), origin=COORDINATOR)
    assert stale.error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    fenced = log.append(marker(1, 1, abort=True, coordinator_epoch=4), origin=COORDINATOR)
    assert fenced.error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == end
    bump = log.append(marker(1, 3, abort=True, coordinator_epoch=4), origin=COORDINATOR)
    assert bump.error == ErrorCode.NONE
    assert log.active_producers()[0].producer_epoch == 3
    # the old epoch's producer is now fenced
    assert log.append(producer_batch(1, 2, 2)).error == ErrorCode.INVALID_PRODUCER_EPOCH


def test_non_transactional_write_into_open_txn_is_invalid_txn_state(tmp_path):
    log = open_log(tmp_path)
    log.append(producer_batch(1, 0, 0, 1, txn=True))
    assert log.append(producer_batch(1, 0, 1)).error == ErrorCode.INVALID_TXN_STATE


def test_remove_expired_producers(tmp_path):
    log = open_log(tmp_path, producer_id_expiration_ms=1_000)
    log.append(producer_batch(1, 0, 0, timestamp=10_000))
    log.append(producer_batch(2, 0, 0, txn=True, timestamp=10_000))
    assert log.remove_expired_producers(now_ms=20_000) == 1
    assert [p.producer_id for p in log.active_producers()] == [2]
    # an expired producer is unknown again: any sequence is accepted (KIP-360)
    assert log.append(producer_batch(1, 0, 7)).error == ErrorCode.NONE


# -- the 5-batch window against a model ---------------------------------------------------------

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(1, 3)),
        st.tuples(st.just("retry"), st.integers(1, 8)),
        st.tuples(st.just("gap"), st.integers(1, 3)),
        st.tuples(st.just("bump"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start_seq=st.sampled_from([0, 2**31 - 4]), ops=_ops)
def test_window_matches_model(start_seq, ops):
    """Sends, retries of the k-th latest batch, gaps and epoch bumps: the log answers as a
    model with a 5-batch window does, and holds each record exactly once."""
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(directory)
        epoch, next_seq = 0, start_seq
        sent: list[tuple[int, int, int, int, int]] = []  # (epoch, seq, count, base, last) accepted
        expected_values: list[bytes] = []
        for n, (op, arg) in enumerate(ops):
            if op == "send":
                tag = b"m%d" % n
                result = log.append(producer_batch(9, epoch, next_seq, arg, tag=tag))
                assert result.error == ErrorCode.NONE and not result.duplicate
                sent.append((epoch, next_seq, arg, result.base_offset, result.last_offset))
                expected_values.extend(tag + b"-%d" % i for i in range(arg))
                next_seq = (next_seq + arg) % 2**31
            elif op == "retry":
                same_epoch = [s for s in sent if s[0] == epoch]
                if arg > len(same_epoch):
                    continue
                e, seq, count, base, last = same_epoch[-arg]
                result = log.append(producer_batch(9, e, seq, count))
                if arg <= 5:
                    assert result.error == ErrorCode.NONE and result.duplicate
                    assert (result.base_offset, result.last_offset) == (base, last)
                else:
                    assert result.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            elif op == "gap":
                if not sent:
                    continue  # an unknown producer may start anywhere
                result = log.append(producer_batch(9, epoch, (next_seq + arg) % 2**31))
                assert result.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            else:
                epoch, next_seq = epoch + 1, 0
        log.flush()
        assert record_values(log.read(0, 1 << 30).records) == expected_values
        log.close()
