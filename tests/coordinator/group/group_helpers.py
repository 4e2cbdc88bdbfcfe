"""Shared helpers for the group coordinator tests: a coordinator on a real LogManager in a
temporary directory, consumer-protocol metadata, and members that join and sync."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from onceflow.common import TopicPartition
from onceflow.coordinator.group.config import GroupConfig
from onceflow.coordinator.group.coordinator import GroupCoordinator
from onceflow.coordinator.group.member import JoinResult
from onceflow.coordinator.group.offsets import CommittedOffset
from onceflow.log.manager import LogManager
from onceflow.protocol.errors import ErrorCode

TEST_CONFIG = GroupConfig(
    min_session_timeout_ms=10,
    max_session_timeout_ms=60_000,
    initial_rebalance_delay_ms=0,
    offsets_topic_num_partitions=3,
)

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: int16 version, topic array, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        data = topic.encode()
        out += struct.pack(">h", len(data)) + data
    return out + struct.pack(">i", -1)


PROTOCOLS = [("range", subscription("orders"))]


def config(**overrides: Any) -> GroupConfig:
    """TEST_CONFIG with some fields replaced."""
    return replace(TEST_CONFIG, **overrides)


class Clock:
    """A settable wall clock in milliseconds."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def run(
    data_dir: Path,
    scenario: Callable[[GroupCoordinator], Awaitable[Any]],
    *,
    group_config: GroupConfig = TEST_CONFIG,
    clock: Callable[[], int] | None = None,
) -> Any:
    """Start a LogManager on `data_dir` and a loaded coordinator, run `scenario`, shut down."""

    async def main() -> Any:
        manager = LogManager(str(data_dir))
        manager.start()
        coordinator = GroupCoordinator(group_config, clock=clock)
        coordinator.load(manager)
        try:
            return await asyncio.wait_for(scenario(coordinator), 20)
        finally:
            await coordinator.shutdown()
            await manager.shutdown()

    return asyncio.run(main())


async def join(
    coordinator: GroupCoordinator,
    group: str = "g",
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols=PROTOCOLS,
    session_ms: int = 10_000,
    rebalance_ms: int = 5_000,
    api_version: int = 5,
    protocol_type: str = "consumer",
) -> JoinResult:
    """One JoinGroup request."""
    return await coordinator.membership.join(
        group, member_id, instance, protocol_type, protocols, session_ms, rebalance_ms,
        "client", "/127.0.0.1", api_version=api_version,
    )  # fmt: skip


async def join_with_id(coordinator: GroupCoordinator, group: str = "g", **kw: Any) -> JoinResult:
    """JoinGroup v4+ as a client does it: MEMBER_ID_REQUIRED, then join again with the id."""
    first = await join(coordinator, group, **kw)
    if first.error != ErrorCode.MEMBER_ID_REQUIRED:
        return first
    return await join(coordinator, group, first.member_id, **kw)


async def stable_group(
    coordinator: GroupCoordinator, group: str = "g", members: int = 1, **kw: Any
) -> list[JoinResult]:
    """Bring `members` dynamic members to a STABLE generation (leader assigns b"a-<id>")."""
    results = await asyncio.gather(
        *(join_with_id(coordinator, group, **kw) for _ in range(members))
    )
    generation = max(r.generation_id for r in results)
    if any(r.generation_id != generation for r in results):
        # members that joined after the first generation completed: rejoin everyone
        results = await asyncio.gather(
            *(join(coordinator, group, r.member_id, **kw) for r in results)
        )
    leader = results[0].leader
    assignments = {r.member_id: b"a-" + r.member_id.encode() for r in results}
    syncs = await asyncio.gather(
        *(
            coordinator.membership.sync(
                group,
                r.generation_id,
                r.member_id,
                assignments=assignments if r.member_id == leader else None,
            )  # fmt: skip
            for r in results
        )
    )
    for s in syncs:
        if s.error != ErrorCode.NONE:
            raise AssertionError(f"sync failed: {s}")
    return list(results)


def offsets(**by_partition: int) -> dict[TopicPartition, CommittedOffset]:
    """`offsets(p0=5, p1=7)` -> {orders-0: 5, orders-1: 7}."""
    return {
        TopicPartition("orders", int(name[1:])): CommittedOffset(value, metadata=f"m{value}")
        for name, value in by_partition.items()
    }


async def committed(coordinator: GroupCoordinator, group: str, tp: TopicPartition) -> int:
    """The committed offset OffsetFetch answers for `tp` (-1 if none)."""
    result = await coordinator.fetch_offsets(group, [tp])
    return result.partitions[tp].offset
