"""LogManager: topic registry, partition directories, restart, deletion and crash leftovers."""

from __future__ import annotations

import asyncio
import json
import logging
import os

import pytest

from log.log_helpers import make_batch, record_offsets
from onceflow.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_FILE,
    REGISTRY_FILE,
    LogManager,
    parse_partition_dir,
    topic_id_from_str,
    topic_id_to_str,
)
from onceflow.protocol.errors import ErrorCode


def _manager(path, **props) -> LogManager:
    manager = LogManager(str(path), props)
    manager.start()
    return manager


def test_create_topic_writes_registry_and_partition_metadata(tmp_path):
    manager = _manager(tmp_path)
    result = manager.create_topic("orders.v1-eu", 3, {"retention.ms": "1000"})
    assert result.error == ErrorCode.NONE and result.topic_id is not None
    registry = json.loads((tmp_path / REGISTRY_FILE).read_text())
    entry = registry["topics"]["orders.v1-eu"]
    assert entry == {
        "topic_id": topic_id_to_str(result.topic_id),
        "partitions": 3,
        "configs": {"retention.ms": "1000"},
    }
    for p in range(3):
        metadata = (tmp_path / f"orders.v1-eu-{p}" / "partition.metadata").read_text()
        assert metadata == f"version: 0\ntopic_id: {topic_id_to_str(result.topic_id)}\n"
        assert manager.get_log("orders.v1-eu", p).config.retention_ms == 1000
    assert manager.get_log("orders.v1-eu", 3) is None
    manager.close()


@pytest.mark.parametrize(
    ("name", "partitions", "configs", "error"),
    [
        ("", 1, None, ErrorCode.INVALID_TOPIC_EXCEPTION),
        (".", 1, None, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("..", 1, None, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("a b", 1, None, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("tópico", 1, None, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("x" * 250, 1, None, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("a_b", 1, None, ErrorCode.INVALID_TOPIC_EXCEPTION),  # collides with "a.b"
        ("a.b", 1, None, ErrorCode.TOPIC_ALREADY_EXISTS),
        ("fresh", 0, None, ErrorCode.INVALID_PARTITIONS),
        ("fresh", 1, {"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG),
        ("fresh", 1, {"no.such.config": "1"}, ErrorCode.INVALID_CONFIG),
        ("x" * 249, 1, None, ErrorCode.NONE),
        ("fresh", -1, {"cleanup.policy": "compact"}, ErrorCode.NONE),
    ],
)
def test_create_topic_errors(tmp_path, name, partitions, configs, error):
    manager = _manager(tmp_path)
    assert manager.create_topic("a.b", 1).error == ErrorCode.NONE
    result = manager.create_topic(name, partitions, configs)
    assert result.error == error
    if error != ErrorCode.NONE:
        assert result.message
        assert sorted(os.listdir(tmp_path)) == ["a.b-0", REGISTRY_FILE]
    manager.close()


def test_validate_only_creates_nothing(tmp_path):
    manager = _manager(tmp_path)
    assert manager.create_topic("t", 2, validate_only=True).error == ErrorCode.NONE
    assert manager.topic("t") is None and not (tmp_path / "t-0").exists()


def test_partition_dir_names_split_at_last_dash():
    assert parse_partition_dir("my-topic.v1-12") == ("my-topic.v1", 12)
    assert parse_partition_dir("t-0.abc-delete") is None
    assert parse_partition_dir("noindex") is None
    some_id = topic_id_from_str("AAAAAAAAAAAAAAAAAAAAAQ")
    assert topic_id_to_str(some_id) == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_restart_keeps_topics_and_data_and_clean_marker(tmp_path):
    manager = _manager(tmp_path)
    topic_id = manager.create_topic("t-x", 2).topic_id
    log = manager.get_log("t-x", 1)
    log.append(make_batch(3))
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n2\nt-x 0 0\nt-x 1 3\n"
    manager = _manager(tmp_path)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert manager.topic("t-x").topic_id == topic_id
    log = manager.get_log("t-x", 1)
    assert log.log_end_offset == 3 and log.high_watermark == 3
    assert record_offsets(log.read(0, 10**6).records) == [0, 1, 2]
    manager.close()


def test_unclean_restart_recovers_from_the_checkpoint(tmp_path, caplog):
    manager = _manager(tmp_path)
    manager.create_topic("t", 1)
    log = manager.get_log("t", 0)
    log.append(make_batch(2))
    log.flush()
    manager.checkpoint_recovery_points()
    log.append(make_batch(2, value_size=50))
    path = log.active_segment.log_path
    size = os.path.getsize(path)
    os.truncate(path, size - 10)  # the crash tore the last batch
    with caplog.at_level(logging.INFO, logger="onceflow.log"):
        manager = _manager(tmp_path)
    assert manager.get_log("t", 0).log_end_offset == 2
    assert "recovered t-0: truncated" in caplog.text


def test_delete_topic_and_recreate(tmp_path):
    manager = _manager(tmp_path)
    old_id = manager.create_topic("t", 2).topic_id
    manager.get_log("t", 0).append(make_batch(1))
    assert manager.delete_topic("t").error == ErrorCode.NONE
    assert manager.delete_topic("t").error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert sorted(os.listdir(tmp_path)) == [REGISTRY_FILE]
    assert manager.get_log("t", 0) is None
    new_id = manager.create_topic("t", 1).topic_id
    assert new_id != old_id and manager.get_log("t", 0).log_end_offset == 0
    manager.close()


def test_interrupted_delete_is_finished_on_start(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("gone", 2)
    manager.create_topic("kept", 1)
    manager.get_log("kept", 0).append(make_batch(1))
    manager.close()
    # crash 1: registry updated, directories not yet renamed
    registry = json.loads((tmp_path / REGISTRY_FILE).read_text())
    del registry["topics"]["gone"]
    (tmp_path / REGISTRY_FILE).write_text(json.dumps(registry))
    # crash 2: a directory renamed for deletion but not removed
    os.rename(tmp_path / "gone-1", tmp_path / "gone-1.0123abcd-delete")
    manager = _manager(tmp_path)
    assert sorted(os.listdir(tmp_path)) == sorted([RECOVERY_POINT_FILE, "kept-0", REGISTRY_FILE])
    assert manager.topic("gone") is None
    assert manager.get_log("kept", 0).log_end_offset == 1
    manager.close()


def test_a_failed_creation_whose_cleanup_fails_too_still_answers_and_the_start_cleans(
    tmp_path, monkeypatch, caplog
):
    """Out of descriptors, the third partition cannot be made, and removing the two made
    fails too: CreateTopics still answers KAFKA_STORAGE_ERROR (no exception, so no dropped
    connection), the topic is not registered, and the next start removes what was left."""
    import errno

    from onceflow.log import manager as manager_module

    manager = _manager(tmp_path)
    real_create = manager._create_log

    def create(info, partition, config):
        if partition == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_create(info, partition, config)

    def rmtree(path, *args, **kwargs):
        raise OSError(errno.EMFILE, "Too many open files", path)

    monkeypatch.setattr(manager, "_create_log", create)
    monkeypatch.setattr(manager_module.shutil, "rmtree", rmtree)
    with caplog.at_level(logging.ERROR, logger="onceflow.log"):
        result = manager.create_topic("t", 3)
    assert result.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert "Too many open files" in result.message
    assert manager.topic("t") is None and manager.get_log("t", 0) is None
    left = sorted(n for n in os.listdir(tmp_path) if n.startswith("t-"))
    assert len(left) == 2 and all(n.endswith("-delete") for n in left)
    assert sum("the next start removes it" in r.getMessage() for r in caplog.records) == 2
    monkeypatch.undo()
    manager.close()
    manager = _manager(tmp_path)
    assert not [n for n in os.listdir(tmp_path) if n.startswith("t-")]
    assert manager.create_topic("t", 3).error == ErrorCode.NONE
    manager.close()


def test_registry_survives_a_torn_temp_file_and_missing_partitions(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("t", 1)
    manager.close()
    # a crash while writing the next registry leaves only the temp file behind
    (tmp_path / (REGISTRY_FILE + ".tmp")).write_bytes(b'{"topics": {"half')
    # a crash after the registry write of create_partitions, before the directories
    registry = json.loads((tmp_path / REGISTRY_FILE).read_text())
    registry["topics"]["t"]["partitions"] = 3
    (tmp_path / REGISTRY_FILE).write_text(json.dumps(registry))
    manager = _manager(tmp_path)
    assert not (tmp_path / (REGISTRY_FILE + ".tmp")).exists()
    assert manager.topic("t").partitions == 3
    assert all(manager.get_log("t", p) is not None for p in range(3))
    assert (tmp_path / "t-2" / "partition.metadata").exists()
    manager.close()


def test_missing_registry_is_rebuilt_from_directories(tmp_path):
    manager = _manager(tmp_path)
    topic_id = manager.create_topic("t", 2).topic_id
    manager.get_log("t", 1).append(make_batch(1))
    manager.close()
    os.unlink(tmp_path / REGISTRY_FILE)
    manager = _manager(tmp_path)
    info = manager.topic("t")
    assert (info.topic_id, info.partitions) == (topic_id, 2)
    assert manager.get_log("t", 1).log_end_offset == 1
    manager.close()


def test_create_partitions_only_grows_and_configs_alter(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("t", 2)
    assert manager.create_partitions("t", 2).error == ErrorCode.INVALID_PARTITIONS
    assert manager.create_partitions("nope", 4).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert manager.create_partitions("t", 4).error == ErrorCode.NONE
    assert manager.get_log("t", 3) is not None and manager.topic("t").partitions == 4
    result = manager.alter_topic_configs("t", {"retention.ms": "-2"})
    assert result.error == ErrorCode.INVALID_CONFIG
    assert manager.alter_topic_configs("t", {"retention.ms": "5"}).error == ErrorCode.NONE
    assert manager.get_log("t", 0).config.retention_ms == 5
    manager.close()
    manager = _manager(tmp_path)
    assert manager.get_log("t", 3).config.retention_ms == 5
    manager.close()


def test_broker_defaults_and_retention_through_manager(tmp_path):
    manager = _manager(tmp_path, **{"log.segment.bytes": "400", "log.retention.hours": "1"})
    manager.create_topic("t", 1)
    log = manager.get_log("t", 0)
    assert log.config.segment_bytes == 400 and log.config.retention_ms == 3_600_000
    for i in range(6):
        log.append(make_batch(1, value_size=150, timestamp=1000 + i))
    log.flush()
    assert manager.delete_old_segments(now_ms=1000 + 3_600_000 + 100) >= 2
    assert log.log_start_offset > 0
    manager.close()


def test_shutdown_stops_committer_then_closes(tmp_path):
    manager = _manager(tmp_path)
    manager.create_topic("t", 1)
    log = manager.get_log("t", 0)

    async def main():
        result = log.append(make_batch(1))
        assert await manager.committer.flushed(log, result.next_offset) == ErrorCode.NONE
        await manager.shutdown()

    asyncio.run(main())
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_several_log_dirs_spread_partitions(tmp_path):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    manager = LogManager(dirs)
    manager.start()
    manager.create_topic("t", 4)
    assert len(os.listdir(dirs[1])) == 2
    manager.get_log("t", 1).append(make_batch(1))
    manager.close()
    manager = LogManager(dirs)
    manager.start()
    assert [manager.get_log("t", p).log_end_offset for p in range(4)] == [0, 1, 0, 0]
    manager.close()


def test_offsets_events_follow_what_a_fetch_can_see(tmp_path):
    """`add_offsets_listener`: one event per change of a partition's high watermark, last
    stable offset or log start offset, whatever changed it, and one per partition of a deleted
    topic; appends that fsync still hides are no event."""
    manager = _manager(tmp_path)
    manager.create_topic("t", 2)
    log = manager.get_log("t", 0)
    events: list[tuple[str, int]] = []
    manager.add_offsets_listener(lambda topic, partition: events.append((topic, partition)))

    async def main():
        result = log.append(make_batch(2))
        assert events == []  # flush.on.ack: invisible until the fsync round
        assert await manager.committer.flushed(log, result.next_offset) == ErrorCode.NONE
        assert events == [("t", 0)]
        log.append(make_batch(1))
        assert manager.alter_topic_configs("t", {"flush.on.ack": "false"}).error == 0
        assert events == [("t", 0)] * 2  # the high watermark is now the log end
        log.append(make_batch(1))
        assert events == [("t", 0)] * 3
        assert log.increment_log_start_offset(1) == 1  # DeleteRecords
        assert log.increment_log_start_offset(1) == 1  # nothing moves: no event
        assert events == [("t", 0)] * 4
        manager.delete_topic("t")
        assert events == [("t", 0)] * 5 + [("t", 1)]
        await manager.shutdown()

    asyncio.run(main())
