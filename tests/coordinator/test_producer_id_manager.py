"""ProducerIdManager: ids unique across restarts and crashes, block persisted before use."""

from __future__ import annotations

import os

import pytest

from onceflow.coordinator.producer_id import (
    PRODUCER_ID_BLOCK_FILE,
    ProducerIdManager,
    ProducerIdStateError,
)


def test_ids_are_consecutive_within_a_block_and_the_next_block_is_persisted_first(tmp_path):
    manager = ProducerIdManager(str(tmp_path), block_size=10)
    assert manager.next_block_start == 0
    assert manager.generate_producer_id() == 0
    # before id 0 was returned, the file already said "start after this block"
    assert ProducerIdManager(str(tmp_path), block_size=10).next_block_start == 10
    assert [manager.generate_producer_id() for _ in range(10)] == list(range(1, 11))
    assert manager.next_block_start == 20


def test_crash_and_reopen_never_reuses_ids(tmp_path):
    seen: set[int] = set()
    for round_ in range(5):
        manager = ProducerIdManager(str(tmp_path), block_size=7)
        for _ in range(round_ * 3 + 1):
            producer_id = manager.generate_producer_id()
            assert producer_id not in seen
            seen.add(producer_id)
        del manager  # "crash": nothing is written on exit
    assert len(seen) == sum(r * 3 + 1 for r in range(5))


def test_a_reopened_manager_skips_the_rest_of_the_block(tmp_path):
    first = ProducerIdManager(str(tmp_path))
    assert first.generate_producer_id() == 0
    assert ProducerIdManager(str(tmp_path)).generate_producer_id() == 1000


def test_leftover_temp_file_is_ignored(tmp_path):
    ProducerIdManager(str(tmp_path), block_size=5).generate_producer_id()
    with open(tmp_path / (PRODUCER_ID_BLOCK_FILE + ".tmp"), "wb") as f:
        f.write(b"half-written")
    assert ProducerIdManager(str(tmp_path), block_size=5).generate_producer_id() == 5


@pytest.mark.parametrize("content", [b"", b"version 1 next_block_start 10 crc 1\n", b"garbage"])
def test_corrupt_block_file_refuses_to_allocate(tmp_path, content):
    with open(os.path.join(tmp_path, PRODUCER_ID_BLOCK_FILE), "wb") as f:
        f.write(content)
    with pytest.raises(ProducerIdStateError):
        ProducerIdManager(str(tmp_path))


def test_persist_failure_hands_out_no_id(tmp_path, monkeypatch):
    import onceflow.coordinator.producer_id as module

    manager = ProducerIdManager(str(tmp_path), block_size=3)

    def fail(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, "write_file_atomically", fail)
    with pytest.raises(OSError):
        manager.generate_producer_id()
    monkeypatch.undo()
    assert manager.generate_producer_id() == 0
    assert ProducerIdManager(str(tmp_path), block_size=3).next_block_start == 3
