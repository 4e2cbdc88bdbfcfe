"""What a cleaning round writes, batch by batch: a batch that keeps every record is copied
verbatim (the same bytes); a batch that loses records is rebuilt from the kept records' own
bytes (same offsets, timestamps, keys, values, headers, codec); and reading the keep/drop
decision off the offset map (`OffsetMap.covers`) writes exactly what scanning every batch
writes.
"""

from __future__ import annotations

import os
import struct
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.cleaner.cleaner_helpers import compacted_manager, end_txn, log_batches
from onceflow.log.cleaner.offset_map import OffsetMap
from onceflow.records.batch import HEADER_SIZE, patch_crc, verify_crc
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType, compress
from onceflow.records.record import decode_records, encode_record

NOW = 100_000


def _batch(records, *, compression=CompressionType.NONE, pid=-1, txn=False) -> bytearray:
    """A batch of `(key, value, timestamp)` records, each with one header."""
    builder = BatchBuilder(
        compression=compression, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
        is_transactional=txn,
    )  # fmt: skip
    for key, value, timestamp in records:
        builder.append(timestamp, key, value, [("h", key)])
    return builder.build()


def _early_base_batch(records, codec) -> bytearray:
    """A batch whose base timestamp lies 1 ms before its first record's (valid v2, though
    Kafka's builder would not write it): rebuilt, it would start at its first record."""
    plain = _batch(records)
    body = bytearray()
    for r in decode_records(plain):
        encode_record(body, r.offset_delta, r.timestamp_delta + 1, r.key, r.value, r.headers)
    batch = plain[:HEADER_SIZE] + compress(codec, body)
    base_timestamp = struct.unpack_from(">q", batch, 27)[0]
    struct.pack_into(">i", batch, 8, len(batch) - 12)  # batchLength
    struct.pack_into(">h", batch, 21, codec)  # attributes: the codec
    struct.pack_into(">q", batch, 27, base_timestamp - 1)
    patch_crc(batch)
    return batch


def _batches(log) -> dict[int, tuple]:
    """base offset -> (header, bytes) of every batch of the log."""
    return {header.base_offset: (header, bytes(data)) for header, data in log_batches(log)}


def _fill(log, appends) -> None:
    for batch in appends:
        log.append(batch, now_ms=NOW)
    for i in range(40):  # roll everything above out of the active segment
        log.append(_batch([(b"filler", b"%d" % i, NOW)]), now_ms=NOW)
    log.flush()


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_batches_that_keep_every_record_are_copied_verbatim(tmp_path, codec):
    manager = compacted_manager(tmp_path)
    log = manager.get_log("c", 0)
    unique = [
        _early_base_batch([(b"u%d-%d" % (n, i), b"v" * 50, 5_000 + i) for i in range(5)], codec)
        for n in range(6)
    ]
    superseded = _batch([(b"u0-0", b"new", 6_000)], compression=codec)
    _fill(log, [*unique, superseded, _batch([(b"x", b"y", 7_000)], compression=codec)])
    before = _batches(log)
    assert manager.cleaner.clean_log(log, now_ms=NOW) is not None
    after = _batches(log)
    for base in range(5, 30, 5):  # unique batches 1..5: every record stays
        assert after[base][1] == before[base][1]
    # the first lost one record: rebuilt, not the same bytes
    assert after[0][1] != before[0][1] and after[0][0].records_count == 4
    manager.close()


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
@pytest.mark.parametrize("drop_first", [False, True])
def test_a_rebuilt_batch_keeps_each_kept_record_whole(tmp_path, codec, drop_first):
    manager = compacted_manager(tmp_path)
    log = manager.get_log("c", 0)
    keys = [b"a", b"b", b"c", b"d"]
    original = _batch(
        [(key, b"value of %s" % key, 9_000 + 300 * i) for i, key in enumerate(keys)],
        compression=codec,
    )
    gone = [b"a", b"c"] if drop_first else [b"b", b"c"]
    _fill(log, [original, _batch([(key, b"newer", 20_000) for key in gone])])
    old_records = decode_records(original)
    assert manager.cleaner.clean_log(log, now_ms=NOW) is not None
    header, data = _batches(log)[0]
    assert verify_crc(data, header) and header.compression == codec
    assert header.last_offset_delta == len(keys) - 1 and header.max_timestamp == 9_900
    expected = [r for r in old_records if r.key not in gone]
    rebuilt = decode_records(data)
    assert header.base_timestamp == 9_000 + expected[0].timestamp_delta
    assert [(r.offset_delta, header.base_timestamp + r.timestamp_delta) for r in rebuilt] == [
        (r.offset_delta, 9_000 + r.timestamp_delta) for r in expected
    ]
    assert [(r.key, r.value, r.headers) for r in rebuilt] == [
        (r.key, r.value, r.headers) for r in expected
    ]
    manager.close()


_record = st.tuples(st.sampled_from([b"k%d" % i for i in range(6)] + [None]), st.booleans())
_append = st.tuples(
    st.lists(_record, min_size=1, max_size=6),
    st.sampled_from([None, "txn-commit", "txn-abort"]),
    st.booleans(),  # compressed
    st.booleans(),  # a cleaning round after it
)


def _log_files(path) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(path):
        for name in names:
            if name.endswith((".log", ".txnindex")):
                with open(os.path.join(root, name), "rb") as f:
                    out[name] = f.read()
    return out


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(appends=st.lists(_append, min_size=5, max_size=40))
def test_reading_the_map_writes_what_scanning_every_batch_writes(tmp_path_factory, appends):
    path = tmp_path_factory.mktemp("cleaner")
    managers = [compacted_manager(path / "map"), compacted_manager(path / "scan")]
    logs = [manager.get_log("c", 0) for manager in managers]
    now = NOW

    def clean_both() -> None:
        managers[0].cleaner.clean_log(logs[0], now_ms=now)
        with mock.patch.object(OffsetMap, "covers", lambda self, header: False):
            managers[1].cleaner.clean_log(logs[1], now_ms=now)

    for n, (records, txn, compressed, clean) in enumerate(appends):
        now += 1_000
        pairs = [(key, None if dead else b"v%d" % n, now) for key, dead in records]
        codec = CompressionType.LZ4 if compressed else CompressionType.NONE
        batch = _batch(pairs, compression=codec, pid=9 if txn else -1, txn=bool(txn))
        for log in logs:
            log.append(bytearray(batch), now_ms=now)
            if txn:
                end_txn(log, 9, 0, abort=txn == "txn-abort")
            log.flush()
        if clean:
            clean_both()
    for i in range(30):
        for log in logs:
            log.append(_batch([(b"filler", b"%d" % i, now)]), now_ms=now)
            log.flush()
    for _ in range(2):  # the second round sees the tombstones' horizons pass
        now += 1_000
        clean_both()
    assert _log_files(path / "map") == _log_files(path / "scan")
    for manager in managers:
        manager.close()
