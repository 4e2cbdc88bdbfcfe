"""The application-thread side of a consumer's group membership (Kafka's
`ConsumerCoordinator.poll` and offset APIs), driving `ConsumerCoordinator` on the I/O thread.

- `ensure_active_group(deadline)` — called by `poll`: when a (re)join is needed, revokes the
  owned partitions (eager protocol: auto-commit, then `on_revoke`), starts the join on the
  I/O thread and waits for it up to the poll's deadline (a later poll picks it up); once
  joined, installs the assignment and calls `on_assign`.
- `update_positions(deadline)` — partitions of a new assignment start at the group's
  committed offsets (OffsetFetch, with require_stable for read_committed consumers, retried
  while the broker answers UNSTABLE_OFFSET_COMMIT), else at auto.offset.reset.
- `commit`, `committed`, `maybe_auto_commit` (enable.auto.commit), `close` (commit, revoke,
  LeaveGroup). A synchronous `commit` or `committed` retries retriable errors until its
  timeout, waiting `retry.backoff.ms` doubled per failed round up to `retry.backoff.max.ms`.

Callbacks get `(consumer, [TopicPartition, ...])`, as confluent-kafka's `on_assign` and
`on_revoke`; they run in the application thread inside `poll`, `unsubscribe` or `close`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from onceflow.client.consumer.group.coordinator import (
    ConsumerCoordinator,
    JoinedGeneration,
    MemberState,
    code_name,
)
from onceflow.client.consumer.subscription import SubscriptionState
from onceflow.client.errors import (
    BrokerResponseError,
    CommitFailedError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)
from onceflow.client.net.backoff import retry_backoff
from onceflow.client.net.io_thread import IOThread
from onceflow.client.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode

__all__ = ["ConsumerMembership"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_TRANSPORT_ERRORS = (OSError, KafkaTimeoutError, BrokerResponseError)
_COMMIT_FAILED = (
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.REBALANCE_IN_PROGRESS,
)
Callback = Callable[[Any, list[TopicPartition]], Any]


class ConsumerMembership:
    """One consumer's group: subscription, rebalances, committed offsets."""

    def __init__(
        self,
        consumer: Any,
        coordinator: ConsumerCoordinator,
        io: IOThread,
        subs: SubscriptionState,
        config: Any,
    ):
        self.consumer = consumer
        self.coordinator = coordinator
        self.io = io
        self.subs = subs
        self.require_stable = config["isolation.level"] == "read_committed"
        self.auto_commit = config["enable.auto.commit"]
        self.auto_commit_interval_s = config["auto.commit.interval.ms"] / 1000
        self.request_timeout_s = config["request.timeout.ms"] / 1000
        self.retry_backoff = retry_backoff(config)
        self.default_timeout_s = config["default.api.timeout.ms"] / 1000
        self.next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self.subscription: list[str] | None = None
        self.on_assign: Callback | None = None
        self.on_revoke: Callback | None = None
        self._join: concurrent.futures.Future[JoinedGeneration] | None = None
        self._heartbeat: concurrent.futures.Future[None] | None = None

    # ------------------------------------------------------------------ subscription

    def subscribe(
        self, topics: list[str], on_assign: Callback | None, on_revoke: Callback | None
    ) -> None:
        self.on_assign, self.on_revoke = on_assign, on_revoke
        if self.subscription != sorted(set(topics)):
            self.subscription = sorted(set(topics))
            self.coordinator.subscription = self.subscription
            self.coordinator.rejoin_needed = True
        if self._heartbeat is None:
            self._heartbeat = self._start(self.coordinator.heartbeat_loop())

    def unsubscribe(self) -> None:
        if self.subscription is None:
            return
        self._revoke_all()
        self._cancel_join()
        self._call(self.coordinator.leave_group("the consumer unsubscribed"), 5.0)
        self.subscription = None

    def _start(self, coro: Coroutine[Any, Any, _T]) -> concurrent.futures.Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.io.loop)

    def _call(self, coro: Any, timeout: float) -> Any:
        try:
            return self.io.call(coro, timeout)
        except _TRANSPORT_ERRORS as exc:
            log.debug("group %s: %s", self.coordinator.group_id, exc)
            return None

    # ------------------------------------------------------------------ rebalances

    def ensure_active_group(self, deadline: float) -> bool:
        """Join when needed; True once the member holds its assignment for this generation."""
        coordinator = self.coordinator
        coordinator.last_poll = time.monotonic()
        if coordinator.fatal_error is not None:
            raise coordinator.fatal_error
        if self._join is None:
            if not coordinator.rejoin_needed and coordinator.state is MemberState.STABLE:
                return True
            self._revoke_all()
            self._join = self._start(coordinator.join_group())
        try:
            result = self._join.result(max(deadline - time.monotonic(), 0.0))
        except (TimeoutError, concurrent.futures.TimeoutError):
            return False
        except concurrent.futures.CancelledError:
            self._join = None
            return False
        except BaseException:
            self._join = None
            raise
        self._join = None
        self.subs.assign_from_group(result.assignment)
        if self.on_assign is not None:
            self._callback(self.on_assign, list(result.assignment), "on_assign")
        return not coordinator.rejoin_needed

    def _revoke_all(self) -> None:
        owned = list(self.subs.assignment)
        if not owned:
            return
        if self.auto_commit:
            try:
                self.commit(None, False, self.default_timeout_s)
            except KafkaError as exc:
                log.warning(
                    "group %s: offset commit before rebalance failed: %s",
                    self.coordinator.group_id,
                    exc,
                )
        if self.on_revoke is not None:
            self._callback(self.on_revoke, owned, "on_revoke")
        self.subs.assign({})

    def _callback(self, callback: Callback, partitions: list[TopicPartition], name: str) -> None:
        try:
            callback(self.consumer, partitions)
        except Exception:
            log.exception("group %s: %s callback raised", self.coordinator.group_id, name)

    def _cancel_join(self) -> None:
        if self._join is not None:
            self._join.cancel()
            self._join = None

    # ------------------------------------------------------------------ positions

    def update_positions(self, deadline: float) -> None:
        """Look up committed offsets for partitions that wait for them."""
        with self.subs.lock:
            waiting = [tp for tp, state in self.subs.assignment.items() if state.awaiting_committed]
        if not waiting:
            return
        timeout = min(max(deadline - time.monotonic(), 0.5), self.request_timeout_s)
        answer = self._call(self.coordinator.fetch_committed(waiting, self.require_stable), timeout)
        if answer is None:
            return
        with self.subs.lock:
            for tp, (code, committed) in answer.items():
                state = self.subs.assignment.get(tp)
                if state is None or not state.awaiting_committed:
                    continue
                if code == ErrorCode.NONE:
                    if committed is not None:
                        state.seek(committed.offset)
                    else:
                        state.request_reset(self.subs.default_reset)
                elif code == ErrorCode.UNSTABLE_OFFSET_COMMIT or ErrorCode(code).retriable:
                    log.debug(
                        "group %s: committed offset of %s: %s",
                        self.coordinator.group_id,
                        tp,
                        code_name(code),
                    )
                else:
                    state.awaiting_committed = False
                    state.error = error_for_code(code, f"OffsetFetch {tp.topic}-{tp.partition}")
            self.subs.changed.notify_all()

    # ------------------------------------------------------------------ offsets

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        with self.subs.lock:
            return {
                tp: OffsetAndMetadata(state.position)
                for tp, state in self.subs.assignment.items()
                if state.position is not None
            }

    def commit(
        self,
        offsets: dict[TopicPartition, OffsetAndMetadata] | None,
        asynchronous: bool,
        timeout: float,
    ) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """OffsetCommit (the consumed positions when `offsets` is None); synchronous commits
        retry retriable errors up to `timeout` seconds."""
        if offsets is None:
            offsets = self.consumed_offsets()
        if not offsets:
            return {} if not asynchronous else None
        if asynchronous:
            future = self._start(self.coordinator.commit_offsets(offsets))
            future.add_done_callback(self._log_async_commit)
            return None
        deadline = time.monotonic() + timeout
        attempts = 0  # failed rounds in a row: each waits longer (KIP-580)
        while True:
            codes = self._call(
                self.coordinator.commit_offsets(offsets), max(deadline - time.monotonic(), 0.1)
            )
            if codes is not None:
                failed = {tp: c for tp, c in codes.items() if c != ErrorCode.NONE}
                if not failed:
                    return dict(offsets)
                code = next(iter(failed.values()))
                if code in _COMMIT_FAILED:
                    raise CommitFailedError(
                        "Commit cannot be completed since the group has already rebalanced and "
                        f"assigned the partitions to another member ({code_name(code)})"
                    )
                known = ErrorCode.of(code)
                if not (isinstance(known, ErrorCode) and known.retriable):
                    raise error_for_code(
                        code, f"OffsetCommit for group {self.coordinator.group_id}"
                    )
                offsets = {tp: offsets[tp] for tp in failed}
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"offset commit did not complete within {timeout} s")
            time.sleep(self.retry_backoff.backoff_s(attempts))
            attempts += 1

    def _log_async_commit(
        self, future: concurrent.futures.Future[dict[TopicPartition, int]]
    ) -> None:
        try:
            codes = future.result()
        except BaseException as exc:
            log.info("group %s: asynchronous commit failed: %s", self.coordinator.group_id, exc)
            return
        failed = {tp: code_name(c) for tp, c in codes.items() if c}
        if failed:
            log.info("group %s: asynchronous commit failed: %s", self.coordinator.group_id, failed)

    def maybe_auto_commit(self) -> None:
        if not self.auto_commit or time.monotonic() < self.next_auto_commit:
            return
        self.next_auto_commit = time.monotonic() + self.auto_commit_interval_s
        self.commit(None, True, 0)

    def committed(
        self, partitions: list[TopicPartition], timeout: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None where nothing is committed)."""
        deadline = time.monotonic() + timeout
        attempts = 0
        while True:
            answer = self._call(
                self.coordinator.fetch_committed(partitions, self.require_stable),
                max(deadline - time.monotonic(), 0.1),
            )
            if answer is not None:
                pending = [tp for tp, (code, _c) in answer.items() if code != ErrorCode.NONE]
                if not pending:
                    return {tp: committed for tp, (_code, committed) in answer.items()}
                code = answer[pending[0]][0]
                known = ErrorCode.of(code)
                if code != ErrorCode.UNSTABLE_OFFSET_COMMIT and not (
                    isinstance(known, ErrorCode) and known.retriable
                ):
                    raise error_for_code(code, f"OffsetFetch for group {self.coordinator.group_id}")
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"Timeout of {timeout * 1000:.0f}ms expired before the last committed offset "
                    "for partitions could be determined"
                )
            time.sleep(self.retry_backoff.backoff_s(attempts))
            attempts += 1

    def group_metadata(self) -> ConsumerGroupMetadata:
        c = self.coordinator
        return ConsumerGroupMetadata(c.group_id, c.generation_id, c.member_id, c.group_instance_id)

    # ------------------------------------------------------------------ close

    def close(self, timeout: float) -> None:
        """Commit (auto-commit), revoke, leave the group, stop heartbeating."""
        try:
            if self.subscription is not None:
                self._revoke_all()
            elif self.auto_commit and self.subs.assignment:
                self.commit(None, False, timeout)
        except KafkaError as exc:
            log.warning("group %s: commit on close failed: %s", self.coordinator.group_id, exc)
        self._cancel_join()
        if self.subscription is not None:
            self._call(self.coordinator.leave_group(), min(timeout, 5.0))
        self.coordinator.running = False
        if self._heartbeat is not None:
            self._heartbeat.cancel()
