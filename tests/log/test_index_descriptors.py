"""Index files are opened lazily: a created or idle partition holds one descriptor (its active
segment's `.log`), a rolled and fsynced segment gives its index descriptors back, and lookups,
reopened writes and fsyncs behave as with the files open all along."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from log.log_helpers import fill, headers_of, open_log
from onceflow.log import index as index_module
from onceflow.log.config import LogConfig
from onceflow.log.index import OffsetIndex


def open_files_under(path) -> list[str]:
    """Names of the files under `path` this process holds a descriptor on."""
    root = os.path.realpath(path)
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the listing's own descriptor
            continue
        if target.startswith(root + os.sep):
            names.append(os.path.basename(target))
    return sorted(names)


def test_a_new_partition_holds_only_its_log_descriptor(tmp_path):
    logs = [open_log(tmp_path / str(i)) for i in range(20)]
    try:
        assert open_files_under(tmp_path) == ["00000000000000000000.log"] * 20
        # the index files exist (recovery treats a missing one as damage), closed
        for name in ("00000000000000000000.index", "00000000000000000000.timeindex"):
            assert os.path.getsize(tmp_path / "0" / "t-0" / name) == 0
    finally:
        for log in logs:
            log.close()


def test_rolled_segments_give_back_their_index_descriptors_once_fsynced(tmp_path):
    config = LogConfig(segment_bytes=600, index_interval_bytes=0)
    log = open_log(tmp_path, config)
    fill(log, 12, value_size=100)
    segments = log.segments
    assert len(segments) >= 4
    log.flush()
    active = segments[-1].log_path
    stem = os.path.basename(active)[:20]
    rolled_logs = [os.path.basename(s.log_path) for s in segments[:-1]]
    # the active segment's indexes were written, so they stay open; rolled ones hold the .log
    assert open_files_under(tmp_path) == sorted(
        [*rolled_logs, f"{stem}.log", f"{stem}.index", f"{stem}.timeindex"]
    )
    log.close()
    assert open_files_under(tmp_path) == []


def test_lookups_after_a_lazy_reopen_give_the_same_positions(tmp_path):
    config = LogConfig(segment_bytes=2000, index_interval_bytes=64)
    log = open_log(tmp_path, config)
    fill(log, 40, records_per_batch=3, value_size=50)
    before = {s.base_offset: list(_entries(s)) for s in log.segments}
    positions = _positions(log)
    log.close()

    # (larger segments: the appends below go to the loaded active segment)
    reopened = open_log(tmp_path, LogConfig(index_interval_bytes=64), clean_shutdown=True)
    assert open_files_under(tmp_path) == sorted(
        os.path.basename(s.log_path) for s in reopened.segments
    )  # loading read the indexes without keeping them open
    assert {s.base_offset: list(_entries(s)) for s in reopened.segments} == before
    assert _positions(reopened) == positions
    for offset in range(reopened.log_end_offset):
        assert headers_of(reopened.read(offset, 1).records)[0].last_offset >= offset
    assert all(not s.offset_index.is_open for s in reopened.segments)  # reads open nothing

    # the active segment's index opens on its next entry and appends after the loaded ones
    active = reopened.active_segment
    count = active.offset_index.entries
    fill(reopened, 3, records_per_batch=3, value_size=50)
    assert active.offset_index.is_open and active.offset_index.entries > count
    reopened.close()
    check = OffsetIndex(active.offset_index.path, active.base_offset, 10**6)
    assert check.load() and list(zip(check._keys, check._values, strict=True)) == list(
        zip(active.offset_index._keys, active.offset_index._values, strict=True)
    )


def _positions(log):
    """Where each offset's batch starts, through the offset index, segment by segment."""
    return [
        segment.translate_offset(offset)
        for segment in log.segments
        for offset in range(segment.base_offset, segment.next_offset)
    ]


def _entries(segment):
    index = segment.offset_index
    return zip(index._keys, index._values, strict=True)


def test_flush_fsyncs_an_index_written_before_its_descriptor_was_closed(tmp_path, monkeypatch):
    synced: list[str] = []
    monkeypatch.setattr(index_module, "fsync_file", synced.append)
    index = OffsetIndex(str(tmp_path / "00000000000000000000.index"), 0, 1024)
    index.flush()  # nothing written: nothing to fsync
    index.append_entries([(3, 100)])
    index.close()
    index.flush()
    assert synced == [index.path]
    index.flush()  # fsynced already
    assert synced == [index.path]


CREATE_MANY = """
import resource, sys, tempfile
from onceflow.log.manager import LogManager

limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
with tempfile.TemporaryDirectory() as data:
    manager = LogManager(data)
    manager.start()
    for t in range(40):
        result = manager.create_topic(f"topic-{t:02d}", 50)
        if result.error:
            print(f"topic {t}: {result.error.name} {result.message}")
            sys.exit(1)
    manager.close()
print("created 2000 partitions")
"""


def test_two_thousand_partitions_fit_in_a_little_over_two_thousand_descriptors(tmp_path):
    """Three descriptors a partition (log and two indexes) would need 6 000."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CREATE_MANY), "2200"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created 2000 partitions" in done.stdout
