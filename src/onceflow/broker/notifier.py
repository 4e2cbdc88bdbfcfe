"""Wake-ups for long-polling fetches when a partition's high watermark moves.

A fetch that has not yet gathered `min_bytes` registers one future under each partition it
reads (`watch`); `notify(topic, partition)` completes every future waiting on that partition.
The fetch then re-reads and either answers or watches again until `max_wait_ms` passes.
`notify_all` wakes everything (topic deletion, shutdown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from onceflow.common import TopicPartition


class HighWatermarkNotifier:
    """Per-partition sets of waiting futures; cheap when nobody waits."""

    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def watch(self, partitions: Iterable[TopicPartition]) -> asyncio.Future[None]:
        """A future completed by the next `notify` of any of `partitions`; call `unwatch`
        with the same partitions when done with it."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for tp in partitions:
            self._waiters.setdefault(tp, set()).add(future)
        return future

    def unwatch(self, partitions: Iterable[TopicPartition], future: asyncio.Future[None]) -> None:
        """Forget `future` (registered by `watch`)."""
        for tp in partitions:
            waiters = self._waiters.get(tp)
            if waiters is not None:
                waiters.discard(future)
                if not waiters:
                    del self._waiters[tp]

    def notify(self, topic: str, partition: int) -> None:
        """The high watermark (or log start) of `topic`/`partition` changed."""
        waiters = self._waiters.pop(TopicPartition(topic, partition), None)
        if waiters:
            for future in waiters:
                if not future.done():
                    future.set_result(None)

    def notify_all(self) -> None:
        """Wake every waiting fetch."""
        waiters = self._waiters
        self._waiters = {}
        for futures in waiters.values():
            for future in futures:
                if not future.done():
                    future.set_result(None)

    def __len__(self) -> int:
        return len(self._waiters)
