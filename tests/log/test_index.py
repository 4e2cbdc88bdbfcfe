"""Sparse indexes: on-disk format, lookups, and index-driven reads against a linear scan."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from log.log_helpers import headers_of, make_batch, open_log
from onceflow.log.config import LogConfig
from onceflow.log.index import OffsetIndex, TimeIndex


def test_offset_index_file_format_and_lookup(tmp_path):
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100, 1024)
    index.append_entries([(105, 4096), (110, 9000)])
    assert open(path, "rb").read() == bytes.fromhex("00000005 00001000 0000000a 00002328")
    assert index.lookup(99) == (100, 0)
    assert index.lookup(104) == (100, 0)
    assert index.lookup(105) == (105, 4096)
    assert index.lookup(200) == (110, 9000)
    index.close()
    reloaded = OffsetIndex(path, 100, 1024)
    assert reloaded.load() and reloaded.lookup(107) == (105, 4096)
    assert reloaded.sanity_check(log_size=10_000) is None
    assert reloaded.sanity_check(log_size=9000) is not None


def test_offset_index_rejects_out_of_order_and_partial_files(tmp_path):
    path = str(tmp_path / "i.index")
    with open(path, "wb") as f:
        f.write(bytes.fromhex("00000005 00001000 00000004 00002000"))
    index = OffsetIndex(path, 0, 1024)
    assert index.load() and "out of order" in index.sanity_check(10**6)
    with open(path, "ab") as f:
        f.write(b"\x00")
    assert not OffsetIndex(path, 0, 1024).load()


def test_time_index_format_lookup_and_full(tmp_path):
    path = str(tmp_path / "00000000000000000010.timeindex")
    index = TimeIndex(path, 10, 24)
    index.append_entries([(1000, 12), (2000, 15)])
    assert open(path, "rb").read() == bytes.fromhex(
        "00000000000003e8 00000002 00000000000007d0 00000005"
    )
    assert index.is_full
    assert index.lookup(999) == (-1, 10)
    assert index.lookup(1500) == (1000, 12)
    assert index.lookup(5000) == (2000, 15)
    assert index.sanity_check(next_offset=16) is None
    assert index.sanity_check(next_offset=15) is not None


batch_shapes = st.lists(
    st.tuples(st.integers(1, 4), st.integers(1, 300), st.integers(0, 5_000)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=batch_shapes,
    interval=st.sampled_from([0, 64, 500, 4096]),
    segment_bytes=st.sampled_from([1600, 4000, 10**6]),
)
def test_index_lookups_match_a_linear_scan(shapes, interval, segment_bytes):
    config = LogConfig(
        index_interval_bytes=interval, segment_bytes=segment_bytes, max_message_bytes=10**6
    )
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(tmp, config)
        for count, size, ts in shapes:
            assert log.append(make_batch(count, value_size=size, timestamp=ts)).error == 0
        log.flush()
        # the linear truth: every batch header, in order, from every segment
        truth = []
        for segment in log.segments:
            truth.extend(header for _, header in segment.iter_headers(0))
        for offset in range(log.log_end_offset):
            containing = next(h for h in truth if h.base_offset <= offset <= h.last_offset)
            first = headers_of(log.read(offset, 1).records)[0]
            assert first.base_offset == containing.base_offset
        for target in sorted({ts for _, _, ts in shapes} | {0, 2_500, 10_000}):
            expected = next((h for h in truth if h.max_timestamp >= target), None)
            found = log.offset_for_timestamp(target)
            if expected is None:
                assert found is None
            else:
                assert expected.base_offset <= found.offset <= expected.last_offset
                assert found.timestamp >= target
        log.close()
        reopened = open_log(tmp, config, clean_shutdown=True)
        for offset in range(0, reopened.log_end_offset, 3):
            assert headers_of(reopened.read(offset, 1).records)[0].last_offset >= offset
        reopened.close()
