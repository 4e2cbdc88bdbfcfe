"""The consumer's assignment and per-partition fetch state, shared by the application thread
and the I/O thread under one lock (Kafka's `SubscriptionState`).

Each assigned partition has a consumer position (the next offset `poll` returns), a fetch
position (the next offset to request: ahead of the position while fetched data waits in the
buffer), a reset strategy when the position is unknown, and a seek generation: a seek bumps
it, and fetched data or offsets carrying an older generation are dropped.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import NoReturn

from onceflow.client.consumer.completed_fetch import CompletedFetch
from onceflow.client.errors import IllegalStateError
from onceflow.common import TopicPartition

__all__ = ["MAX_BUFFERED_FETCHES", "PartitionState", "SubscriptionState"]

MAX_BUFFERED_FETCHES = 2  # per partition: one being consumed, one prefetched


class PartitionState:
    """Fetch state of one assigned partition."""

    __slots__ = (
        "position",
        "fetch_position",
        "reset_strategy",
        "generation",
        "fetch_in_flight",
        "reset_in_flight",
        "buffered",
        "paused",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "error",
        "awaiting_committed",
    )

    def __init__(self, reset_strategy: str):
        self.position: int | None = None
        self.fetch_position: int | None = None
        self.reset_strategy: str | None = reset_strategy
        self.generation = 0
        self.fetch_in_flight = False
        self.reset_in_flight = False
        self.buffered = 0
        self.paused = False
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.error: BaseException | None = None
        self.awaiting_committed = False  # group member: position comes from OffsetFetch

    def seek(self, offset: int) -> None:
        self.position = self.fetch_position = offset
        self.reset_strategy = None
        self.generation += 1
        self.buffered = 0
        self.error = None
        self.awaiting_committed = False

    def request_reset(self, strategy: str) -> None:
        self.position = self.fetch_position = None
        self.reset_strategy = strategy
        self.generation += 1
        self.buffered = 0
        self.awaiting_committed = False

    @property
    def fetchable(self) -> bool:
        return (
            self.fetch_position is not None
            and not self.paused
            and not self.fetch_in_flight
            and self.error is None
            and self.buffered < MAX_BUFFERED_FETCHES
        )


class SubscriptionState:
    """Assigned partitions and the queue of fetched data awaiting `poll`."""

    def __init__(self, default_reset: str):
        self.default_reset = default_reset
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # new data, positions, errors
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.completed: deque[tuple[CompletedFetch, int]] = deque()  # (data, generation)

    def assign(
        self, positions: dict[TopicPartition, int | None], *, use_committed: bool = False
    ) -> None:
        """Replace the assignment; None keeps a partition's current position, or for a newly
        assigned partition starts at the group's committed offset (`use_committed`, a consumer
        with a group.id, as Kafka's does) or at auto.offset.reset."""
        with self.lock:
            new = {}
            for tp, offset in positions.items():
                state = self.assignment.get(tp)
                if state is None:
                    state = PartitionState(self.default_reset)
                    if offset is None and use_committed:
                        state.reset_strategy = None
                        state.awaiting_committed = True
                if offset is not None:
                    self._seek(state, offset)
                new[tp] = state
            self.assignment = new
            self.completed = deque(item for item in self.completed if _tp(item[0]) in new)
            self.changed.notify_all()

    def assign_from_group(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment with a group's: every partition starts at the group's
        committed offset, looked up before fetching (`awaiting_committed`)."""
        with self.lock:
            new = {}
            for tp in partitions:
                state = PartitionState(self.default_reset)
                state.reset_strategy = None
                state.awaiting_committed = True
                new[tp] = state
            self.assignment = new
            self.completed = deque(item for item in self.completed if _tp(item[0]) in new)
            self.changed.notify_all()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        with self.lock:
            state = self.assignment.get(tp)
            if state is None:
                raise_not_assigned(tp)
            self._seek(state, offset)
            self.changed.notify_all()

    def _seek(self, state: PartitionState, offset: int) -> None:
        if offset >= 0:
            state.seek(offset)
        elif offset == -2:
            state.request_reset("earliest")
        elif offset == -1:
            state.request_reset("latest")
        else:
            raise ValueError(f"invalid offset {offset}: use >= 0, -2 (beginning) or -1 (end)")

    def state(self, tp: TopicPartition) -> PartitionState:
        state = self.assignment.get(tp)
        if state is None:
            raise_not_assigned(tp)
        return state


def _tp(fetch: CompletedFetch) -> TopicPartition:
    return TopicPartition(fetch.topic, fetch.partition)


def raise_not_assigned(tp: TopicPartition) -> NoReturn:
    """Raise Kafka's "No current assignment" error for `tp`."""
    raise IllegalStateError(f"No current assignment for partition {tp.topic}-{tp.partition}")
