"""Offset APIs through the broker's handlers, in-process, at every advertised version:
OffsetCommit (simple and member commits, unknown partitions, generation checks), OffsetFetch
(one group before v8, several from v8, null = all partitions, v1's per-partition errors),
committed offsets surviving a restart of the broker state, TxnOffsetCommit (invisible until the
marker, require_stable, epoch fencing, KIP-447 generation fencing) and OffsetDelete."""

from __future__ import annotations

import asyncio

import pytest

from broker.broker_helpers import call, open_state
from broker.test_broker_group_membership import GROUP_SETTINGS, run_with_state, stable_member
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.offset_commit import OffsetCommitRequest
from onceflow.protocol.messages.offset_delete import OffsetDeleteRequest
from onceflow.protocol.messages.offset_fetch import OffsetFetchRequest
from onceflow.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest


def create_topic(state, name="t", partitions=2):
    assert state.logs.create_topic(name, partitions).error == ErrorCode.NONE


def commit_request(group, offsets, generation=-1, member="", instance=None, retention=-1):
    """`offsets`: {(topic, partition): (offset, metadata)}."""
    by_topic: dict[str, list] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=0,
                committed_metadata=metadata,
            )
        )
    return OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=instance,
        retention_time_ms=retention,
        topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
            for t, p in by_topic.items()
        ],
    )


def commit_errors(response) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def fetch_request(version, group, partitions, require_stable=False):
    """`partitions`: {topic: [index, ...]} or None for every committed partition."""
    if version >= 8:
        topic_cls = OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics
        topics = (
            None
            if partitions is None
            else [topic_cls(name=t, partition_indexes=p) for t, p in partitions.items()]
        )
        return OffsetFetchRequest(
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=topics)],
            require_stable=require_stable,
        )
    topic_cls = OffsetFetchRequest.OffsetFetchRequestTopic
    topics = (
        None
        if partitions is None
        else [topic_cls(name=t, partition_indexes=p) for t, p in partitions.items()]
    )
    return OffsetFetchRequest(group_id=group, topics=topics, require_stable=require_stable)


async def fetch(state, version, group, partitions, require_stable=False):
    """(group error, {(topic, partition): (offset, metadata, error)})."""
    request = fetch_request(version, group, partitions, require_stable)
    response = await call(state, ApiKey.OFFSET_FETCH, version, request)
    if version >= 8:
        (answer,) = response.groups
        assert answer.group_id == group
        error, topics = answer.error_code, answer.topics
    else:
        error, topics = (response.error_code if version >= 2 else 0), response.topics
    return error, {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", range(2, 10))
def test_simple_commit_then_fetch_every_commit_version(tmp_path, version):
    async def scenario(state):
        create_topic(state)
        request = commit_request("g", {("t", 0): (5, "m0"), ("t", 1): (7, None), ("x", 0): (1, "")})
        response = await call(state, ApiKey.OFFSET_COMMIT, version, request)
        assert commit_errors(response) == {
            ("t", 0): ErrorCode.NONE,
            ("t", 1): ErrorCode.NONE,
            ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        error, offsets = await fetch(state, 5, "g", {"t": [0, 1, 2]})
        assert error == ErrorCode.NONE
        assert offsets == {("t", 0): (5, "m0", 0), ("t", 1): (7, "", 0), ("t", 2): (-1, "", 0)}

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch_every_version(tmp_path, version):
    async def scenario(state):
        create_topic(state)
        await call(state, ApiKey.OFFSET_COMMIT, 8, commit_request("g", {("t", 1): (42, "meta")}))
        error, offsets = await fetch(state, version, "g", {"t": [0, 1]})
        assert error == ErrorCode.NONE
        assert offsets == {("t", 0): (-1, "", 0), ("t", 1): (42, "meta", 0)}
        if version >= 2:  # null topics: every committed partition
            assert (await fetch(state, version, "g", None))[1] == {("t", 1): (42, "meta", 0)}
        # an unknown group has nothing committed
        assert (await fetch(state, version, "other", {"t": [1]}))[1] == {("t", 1): (-1, "", 0)}

    run_with_state(tmp_path, scenario)


def test_offset_fetch_v8_answers_several_groups(tmp_path):
    async def scenario(state):
        create_topic(state)
        await call(state, ApiKey.OFFSET_COMMIT, 9, commit_request("a", {("t", 0): (1, "")}))
        await call(state, ApiKey.OFFSET_COMMIT, 9, commit_request("b", {("t", 0): (2, "")}))
        group_cls = OffsetFetchRequest.OffsetFetchRequestGroup
        request = OffsetFetchRequest(
            groups=[group_cls(group_id="a", topics=None), group_cls(group_id="b", topics=None)]
        )
        response = await call(state, ApiKey.OFFSET_FETCH, 8, request)
        answers = {
            g.group_id: [(t.name, p.partition_index, p.committed_offset) for t in g.topics
                         for p in t.partitions]
            for g in response.groups
        }  # fmt: skip
        assert answers == {"a": [("t", 0, 1)], "b": [("t", 0, 2)]}

    run_with_state(tmp_path, scenario)


def test_offset_fetch_v1_repeats_the_group_error_per_partition(tmp_path):
    async def main():
        # coordinators not loaded yet: COORDINATOR_LOAD_IN_PROGRESS
        state = open_state(tmp_path / "data", **GROUP_SETTINGS)
        try:
            old = await fetch(state, 1, "g", {"t": [0, 1]})
            new = await fetch(state, 2, "g", {"t": [0]})
        finally:
            await state.close()
        loading = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert old[1] == {("t", 0): (-1, "", loading), ("t", 1): (-1, "", loading)}
        assert new == (loading, {})

    asyncio.run(main())


def test_member_commit_checks_generation_and_member(tmp_path):
    async def scenario(state):
        create_topic(state)
        member, generation = await stable_member(state, "g")
        cases = [
            (generation, member, ErrorCode.NONE),
            (generation + 1, member, ErrorCode.ILLEGAL_GENERATION),
            (generation, "nobody", ErrorCode.UNKNOWN_MEMBER_ID),
            (-1, "", ErrorCode.UNKNOWN_MEMBER_ID),  # a simple commit to a group in use
        ]
        for gen, member_id, expected in cases:
            request = commit_request("g", {("t", 0): (3, "")}, gen, member_id)
            response = await call(state, ApiKey.OFFSET_COMMIT, 9, request)
            assert commit_errors(response) == {("t", 0): expected}, (gen, member_id)
        # generation-based commit to a group that does not exist: v9 says so by name
        request = commit_request("ghost", {("t", 0): (3, "")}, 1, "m")
        v8 = await call(state, ApiKey.OFFSET_COMMIT, 8, request)
        v9 = await call(state, ApiKey.OFFSET_COMMIT, 9, request)
        assert commit_errors(v8) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
        assert commit_errors(v9) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}

    run_with_state(tmp_path, scenario)


def test_committed_offsets_survive_a_restart(tmp_path):
    async def first(state):
        create_topic(state)
        member, generation = await stable_member(state, "g")
        request = commit_request(
            "g", {("t", 0): (11, "a"), ("t", 1): (12, "b")}, generation, member
        )
        assert set(commit_errors(await call(state, ApiKey.OFFSET_COMMIT, 9, request)).values()) == {
            ErrorCode.NONE
        }

    async def second(state):
        error, offsets = await fetch(state, 9, "g", None)
        assert offsets == {("t", 0): (11, "a", 0), ("t", 1): (12, "b", 0)}
        listed = await state.group_coordinator.list_groups()
        assert [(g.group_id, g.state) for g in listed[1]] == [("g", "Empty")]

    run_with_state(tmp_path, first)
    run_with_state(tmp_path, second)


def txn_commit_request(version, pid, epoch, offsets, generation=-1, member="", group="g"):
    """`offsets`: {(topic, partition): offset}."""
    topic_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    by_topic: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            topic_cls.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=""
            )
        )
    return TxnOffsetCommitRequest(
        transactional_id="tx",
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member,
        topics=[topic_cls(name=t, partitions=p) for t, p in by_topic.items()],
    )


def txn_errors(response):
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


@pytest.mark.parametrize("version", range(0, 6))
def test_txn_offset_commit_every_version_is_pending_until_the_marker(tmp_path, version):
    async def scenario(state):
        create_topic(state)
        coordinator = state.group_coordinator
        request = txn_commit_request(version, 1000, 0, {("t", 0): 9, ("x", 0): 1})
        response = await call(state, ApiKey.TXN_OFFSET_COMMIT, version, request)
        assert txn_errors(response) == {
            ("t", 0): ErrorCode.NONE,
            ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert (await fetch(state, 7, "g", {"t": [0]}))[1] == {("t", 0): (-1, "", 0)}
        unstable = (await fetch(state, 7, "g", {"t": [0]}, require_stable=True))[1]
        assert unstable == {("t", 0): (-1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)}
        # the transaction coordinator wrote COMMIT to the group's partition
        coordinator.on_txn_marker(coordinator.partition_for("g"), 1000, True)
        stable = (await fetch(state, 9, "g", {"t": [0]}, require_stable=True))[1]
        assert stable == {("t", 0): (9, "", 0)}

    run_with_state(tmp_path, scenario)


@pytest.mark.parametrize(("version", "expected"), [(1, "INVALID_PRODUCER_EPOCH"), (3, None)])
def test_txn_offset_commit_with_a_stale_epoch_is_fenced(tmp_path, version, expected):
    async def scenario(state):
        create_topic(state)
        request = txn_commit_request(version, 1000, 3, {("t", 0): 9})
        assert txn_errors(await call(state, ApiKey.TXN_OFFSET_COMMIT, version, request)) == {
            ("t", 0): ErrorCode.NONE
        }
        request = txn_commit_request(version, 1000, 2, {("t", 0): 10})
        error = txn_errors(await call(state, ApiKey.TXN_OFFSET_COMMIT, version, request))
        assert error[("t", 0)] in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
        if expected is not None:
            assert error[("t", 0)] == ErrorCode[expected]

    run_with_state(tmp_path, scenario)


def test_txn_offset_commit_v3_fences_a_zombie_generation(tmp_path):
    async def scenario(state):
        create_topic(state)
        member, generation = await stable_member(state, "g")
        ok = txn_commit_request(3, 1000, 0, {("t", 0): 1}, generation, member)
        zombie = txn_commit_request(3, 1000, 0, {("t", 0): 2}, generation - 1, member)
        stranger = txn_commit_request(3, 1000, 0, {("t", 0): 2}, generation, "gone")
        assert txn_errors(await call(state, ApiKey.TXN_OFFSET_COMMIT, 3, ok)) == {
            ("t", 0): ErrorCode.NONE
        }
        assert txn_errors(await call(state, ApiKey.TXN_OFFSET_COMMIT, 3, zombie)) == {
            ("t", 0): ErrorCode.ILLEGAL_GENERATION
        }
        assert txn_errors(await call(state, ApiKey.TXN_OFFSET_COMMIT, 3, stranger)) == {
            ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID
        }

    run_with_state(tmp_path, scenario)


def test_offset_delete(tmp_path):
    async def scenario(state):
        create_topic(state, "t")
        create_topic(state, "other")
        # an active consumer group subscribed to "t" keeps t's offsets, loses other's
        member, generation = await stable_member(state, "g")
        request = commit_request(
            "g", {("t", 0): (1, ""), ("other", 0): (2, "")}, generation, member
        )
        await call(state, ApiKey.OFFSET_COMMIT, 9, request)
        topic_cls = OffsetDeleteRequest.OffsetDeleteRequestTopic
        part_cls = topic_cls.OffsetDeleteRequestPartition
        request = OffsetDeleteRequest(
            group_id="g",
            topics=[
                topic_cls(name="t", partitions=[part_cls(partition_index=0)]),
                topic_cls(name="other", partitions=[part_cls(partition_index=0)]),
                topic_cls(name="nope", partitions=[part_cls(partition_index=0)]),
            ],
        )
        response = await call(state, ApiKey.OFFSET_DELETE, 0, request)
        assert response.error_code == ErrorCode.NONE
        assert {
            (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
        } == {
            ("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
            ("other", 0): ErrorCode.NONE,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        offsets = (await fetch(state, 9, "g", None))[1]
        assert offsets == {("t", 0): (1, "", 0)}
        missing = OffsetDeleteRequest(group_id="ghost", topics=[])
        response = await call(state, ApiKey.OFFSET_DELETE, 0, missing)
        assert (response.error_code, response.topics) == (ErrorCode.GROUP_ID_NOT_FOUND, [])

    run_with_state(tmp_path, scenario)


def test_commit_is_durable_before_the_answer(tmp_path):
    """The commit's batch is flushed (below the high watermark) when OffsetCommit answers."""

    async def scenario(state):
        create_topic(state)
        request = commit_request("g", {("t", 0): (5, "")})
        await call(state, ApiKey.OFFSET_COMMIT, 9, request)
        coordinator = state.group_coordinator
        log = state.get_log("__consumer_offsets", coordinator.partition_for("g"))
        assert log.high_watermark == log.log_end_offset >= 1
        assert TopicPartition("t", 0) in coordinator.groups["g"].offsets.committed

    run_with_state(tmp_path, scenario)
