"""The consumer's group-coordinator client (Kafka's `ConsumerCoordinator`), on the I/O thread.

Every method is a coroutine for the consumer's I/O loop; the application thread runs them
with `IOThread.call` or starts them as tasks. Requests go to the group's coordinator (found
with FindCoordinator, key type GROUP) on a connection of its own.

- `join_group()` — the classic protocol: JoinGroup (a second time with the member id the
  coordinator hands out, KIP-394), the leader assigns partitions with the strategy the
  coordinator chose (`assignors`), SyncGroup; returns the member's partitions. Errors are
  handled by `JOIN_ACTIONS` / `SYNC_ACTIONS` (retry, rejoin with a reset member id, find the
  coordinator again, or fail).
- `heartbeat_loop()` — while the member is STABLE, a Heartbeat every heartbeat.interval.ms;
  REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION and UNKNOWN_MEMBER_ID set `rejoin_needed`; when
  the application has not polled for max.poll.interval.ms the member leaves the group.
- `commit_offsets()` (OffsetCommit with the generation and member id), `fetch_committed()`
  (OffsetFetch, with require_stable for read_committed consumers), `leave_group()`.

Static members (group.instance.id, KIP-345) do not send LeaveGroup when closing, as in Kafka.
A failed coordinator lookup and a join round that must be retried wait `retry.backoff.ms`,
doubled for each further failure in a row up to `retry.backoff.max.ms`, with +/-20% jitter
(KIP-580); each `connection()` or `join_group()` call starts from `retry.backoff.ms`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any, Final, NamedTuple, TypeVar

from onceflow.client.config import ClientConfig
from onceflow.client.consumer.group.assignors import assignor_for
from onceflow.client.consumer.group.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from onceflow.client.errors import (
    BrokerResponseError,
    KafkaTimeoutError,
    error_for_code,
)
from onceflow.client.net.backoff import retry_backoff
from onceflow.client.net.coordinator_lookup import GROUP, find_coordinator
from onceflow.client.net.network import AsyncBrokerConnection, NetworkClient
from onceflow.client.offsets import OffsetAndMetadata
from onceflow.common import TopicPartition
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.codec import DecodeError
from onceflow.protocol.errors import ErrorCode, error_name
from onceflow.protocol.message import Message, Request
from onceflow.protocol.messages.heartbeat import HeartbeatRequest
from onceflow.protocol.messages.join_group import JoinGroupRequest
from onceflow.protocol.messages.leave_group import LeaveGroupRequest
from onceflow.protocol.messages.offset_commit import OffsetCommitRequest
from onceflow.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from onceflow.protocol.messages.sync_group import SyncGroupRequest

__all__ = ["GroupAction", "ConsumerCoordinator", "JoinedGeneration", "MemberState"]

log = logging.getLogger(__name__)
_TRANSPORT_ERRORS = (OSError, KafkaTimeoutError, BrokerResponseError)
_E = ErrorCode
_R = TypeVar("_R", bound=Message)
_FetchedTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FetchedTopicV8 = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
CONSUMER_PROTOCOL_TYPE = "consumer"


class MemberState(Enum):
    UNJOINED = "unjoined"
    REBALANCING = "rebalancing"
    STABLE = "stable"


class GroupAction(Enum):
    """What a group answer's error code means."""

    OK = "ok"
    RETRY = "retry"  # try again after retry.backoff.ms
    LOOKUP = "lookup"  # find the coordinator again, then retry
    REBALANCE = "rebalance"  # a rebalance started: join again (the generation stays valid)
    REJOIN = "rejoin"  # the generation is gone: join again (keeping the member id)
    RESET_MEMBER = "reset_member"  # the member id is gone: join again as a new member
    FAIL = "fail"  # raise to the application


_COORDINATOR = {
    _E.NOT_COORDINATOR: GroupAction.LOOKUP,
    _E.COORDINATOR_NOT_AVAILABLE: GroupAction.LOOKUP,
    _E.REQUEST_TIMED_OUT: GroupAction.LOOKUP,
    _E.COORDINATOR_LOAD_IN_PROGRESS: GroupAction.RETRY,
}


def _table(extra: Mapping[ErrorCode, GroupAction]) -> Mapping[ErrorCode, GroupAction]:
    return MappingProxyType({_E.NONE: GroupAction.OK, **_COORDINATOR, **extra})


JOIN_ACTIONS: Final = _table(
    {
        _E.MEMBER_ID_REQUIRED: GroupAction.REJOIN,  # with the member id in the answer
        _E.UNKNOWN_MEMBER_ID: GroupAction.RESET_MEMBER,
        _E.REBALANCE_IN_PROGRESS: GroupAction.RETRY,
        _E.ILLEGAL_GENERATION: GroupAction.REJOIN,
    }
)
SYNC_ACTIONS: Final = _table(
    {
        _E.REBALANCE_IN_PROGRESS: GroupAction.REBALANCE,
        _E.ILLEGAL_GENERATION: GroupAction.REJOIN,
        _E.UNKNOWN_MEMBER_ID: GroupAction.RESET_MEMBER,
    }
)
HEARTBEAT_ACTIONS: Final = _table(
    {
        _E.REBALANCE_IN_PROGRESS: GroupAction.REBALANCE,
        _E.ILLEGAL_GENERATION: GroupAction.REJOIN,
        _E.UNKNOWN_MEMBER_ID: GroupAction.RESET_MEMBER,
    }
)


def _action(table: Mapping[ErrorCode, GroupAction], code: int) -> GroupAction:
    known = ErrorCode.of(code)
    return table.get(known, GroupAction.FAIL) if isinstance(known, ErrorCode) else GroupAction.FAIL


code_name = error_name  # the client's older name for it


class JoinedGeneration(NamedTuple):
    generation_id: int
    member_id: str
    protocol: str | None
    assignment: list[TopicPartition]


class ConsumerCoordinator:
    """Group membership and offsets of one consumer (I/O-thread coroutines)."""

    def __init__(self, config: ClientConfig, network: NetworkClient):
        self.network = network
        self.metadata = network.metadata
        self.group_id: str = config["group.id"]
        self.group_instance_id: str | None = config["group.instance.id"]
        self.session_timeout_ms = config["session.timeout.ms"]
        self.rebalance_timeout_ms = config["max.poll.interval.ms"]
        self.heartbeat_interval_s = config["heartbeat.interval.ms"] / 1000
        self.request_timeout_s = config["request.timeout.ms"] / 1000
        self.retry_backoff = retry_backoff(config)
        strategies = config["partition.assignment.strategy"]  # validated: every one is known
        self.assignors = [a for a in map(assignor_for, strategies) if a is not None]
        self.coordinator: tuple[int, str, int] | None = None
        self.generation_id = -1
        self.member_id = ""
        self.protocol: str | None = None
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self.fatal_error: BaseException | None = None
        self.subscription: list[str] = []
        self.last_poll = time.monotonic()
        self.last_heartbeat_ok = time.monotonic()
        self.running = True

    # ------------------------------------------------------------------ coordinator

    def coordinator_dead(self, reason: object) -> None:
        if self.coordinator is not None:
            log.info(
                "group %s: coordinator %s unavailable (%s)", self.group_id, self.coordinator, reason
            )
        self.coordinator = None

    async def connection(self) -> AsyncBrokerConnection:
        """The coordinator's connection, finding the coordinator first if needed; raises the
        authentication error when no broker would authenticate this client."""
        attempts = 0  # failed lookups in a row: each waits longer (KIP-580)
        while True:
            if self.coordinator is not None:
                node_id, host, port = self.coordinator
                try:
                    return await self.network.coordinator_connection(GROUP, node_id, host, port)
                except _TRANSPORT_ERRORS as exc:
                    self.coordinator_dead(exc)
            try:
                conn = await self.network.any_connection()
                code, node_id, host, port = await find_coordinator(
                    conn, GROUP, self.group_id, self.request_timeout_s
                )
            except _TRANSPORT_ERRORS as exc:
                log.debug("FindCoordinator for %s failed: %s", self.group_id, exc)
                auth_error = self.network.metadata.auth_error
                if auth_error is not None:  # not retriable (Kafka's lookupCoordinator)
                    raise auth_error from None
            else:
                if code == ErrorCode.NONE:
                    self.coordinator = (node_id, host, port)
                    continue
                if not ErrorCode(code).retriable:
                    raise error_for_code(code, f"FindCoordinator for group {self.group_id}")
            await asyncio.sleep(self.retry_backoff.backoff_s(attempts))
            attempts += 1

    async def request(
        self, message: Request[_R], max_version: int | None = None, timeout_s: float | None = None
    ) -> _R:
        """Send to the coordinator; a transport failure forgets the coordinator and raises."""
        conn = await self.connection()
        version = conn.api_version(message.API_KEY, max_version)
        try:
            return await conn.send(message, version, timeout_s=timeout_s or self.request_timeout_s)
        except _TRANSPORT_ERRORS as exc:
            self.coordinator_dead(exc)
            raise

    def _apply(self, action: GroupAction, code: int, what: str) -> None:
        """Common handling of a join/sync/heartbeat error; raises for FAIL."""
        if action is GroupAction.LOOKUP:
            self.coordinator_dead(code_name(code))
        elif action is GroupAction.RESET_MEMBER:
            self.member_id, self.generation_id = "", -1
            self.rejoin_needed = True
        elif action is GroupAction.REJOIN:
            self.generation_id = -1
            self.rejoin_needed = True
        elif action is GroupAction.REBALANCE:
            self.rejoin_needed = True
        elif action is GroupAction.FAIL:
            error = error_for_code(code, f"{what} for group {self.group_id}")
            if code == ErrorCode.FENCED_INSTANCE_ID:
                self.fatal_error = error
            raise error

    # ------------------------------------------------------------------ join and sync

    async def join_group(self) -> JoinedGeneration:
        """Join (or rejoin) the group and return this member's assignment."""
        self.state = MemberState.REBALANCING
        attempts = 0  # failed rounds in a row: each waits longer (KIP-580)
        while True:
            try:
                result = await self._join_once()
            except _TRANSPORT_ERRORS as exc:
                log.debug("group %s: join failed: %s", self.group_id, exc)
                result = None
            if result is not None:
                return result
            await asyncio.sleep(self.retry_backoff.backoff_s(attempts))
            attempts += 1

    async def _join_once(self) -> JoinedGeneration | None:
        cls = JoinGroupRequest
        metadata = encode_subscription(self.subscription)
        request = cls(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocols=[
                cls.JoinGroupRequestProtocol(name=a.name, metadata=metadata) for a in self.assignors
            ],
        )
        timeout = max(self.request_timeout_s, self.rebalance_timeout_ms / 1000 + 5)
        response = await self.request(request, timeout_s=timeout)
        action = _action(JOIN_ACTIONS, response.error_code)
        if action is not GroupAction.OK:
            if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                # KIP-394: the broker gave a new member its id; join again with it at once,
                # as Kafka's consumer does, not after a retry backoff
                first = not self.member_id
                self.member_id = response.member_id
                return await self._join_once() if first else None
            self._apply(action, response.error_code, "JoinGroup")
            return None
        self.generation_id, self.member_id = response.generation_id, response.member_id
        self.protocol = response.protocol_name
        assignments: dict[str, list[TopicPartition]] = {}
        if response.leader == response.member_id and not getattr(
            response, "skip_assignment", False
        ):
            assignments = await self._assign(response.protocol_name, response.members)
        return await self._sync(assignments, timeout)

    async def _assign(
        self, protocol: str | None, members: list[Any]
    ) -> dict[str, list[TopicPartition]]:
        """The leader's assignment for every member."""
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise error_for_code(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"unknown protocol {protocol}"
            )
        subscriptions = {}
        for member in members:
            try:
                subscriptions[member.member_id] = decode_subscription(member.metadata)
            except DecodeError as exc:
                log.warning(
                    "group %s: bad subscription from %s: %s", self.group_id, member.member_id, exc
                )
                subscriptions[member.member_id] = []
        topics = {t for ts in subscriptions.values() for t in ts}
        self.metadata.add_topics(topics)
        await self.network.refresh_metadata()
        counts = {t: self.metadata.cluster.partition_count(t) or 0 for t in topics}
        assignment = assignor.assign(counts, subscriptions)
        log.info(
            "group %s generation %d: leader assigned %s",
            self.group_id,
            self.generation_id,
            {m: len(ps) for m, ps in assignment.items()},
        )
        return assignment

    async def _sync(
        self, assignments: dict[str, list[TopicPartition]], timeout: float
    ) -> JoinedGeneration | None:
        cls = SyncGroupRequest
        request = cls(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=self.protocol,
            assignments=[
                cls.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(ps))
                for m, ps in assignments.items()
            ],
        )
        response = await self.request(request, timeout_s=timeout)
        action = _action(SYNC_ACTIONS, response.error_code)
        if action is not GroupAction.OK:
            self._apply(action, response.error_code, "SyncGroup")
            return None
        partitions = decode_assignment(response.assignment)
        self.state = MemberState.STABLE
        self.rejoin_needed = False
        self.last_heartbeat_ok = time.monotonic()
        log.info(
            "group %s generation %d: member %s assigned %s",
            self.group_id,
            self.generation_id,
            self.member_id,
            sorted(partitions),
        )
        return JoinedGeneration(self.generation_id, self.member_id, self.protocol, partitions)

    # ------------------------------------------------------------------ heartbeat

    async def heartbeat_loop(self) -> None:
        """Heartbeat while STABLE; leave when the application stopped polling."""
        while self.running:
            await asyncio.sleep(self.heartbeat_interval_s)
            if self.state is not MemberState.STABLE or self.rejoin_needed or not self.running:
                continue
            now = time.monotonic()
            if now - self.last_poll > self.rebalance_timeout_ms / 1000:
                log.warning(
                    "group %s: no poll for more than max.poll.interval.ms (%d ms); leaving the "
                    "group",
                    self.group_id,
                    self.rebalance_timeout_ms,
                )
                await self.leave_group("consumer poll timeout has expired")
                continue
            try:
                await self._heartbeat()
            except _TRANSPORT_ERRORS as exc:
                log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            except Exception as exc:  # FAIL: kept for the application's next poll
                log.warning("group %s: heartbeat error: %s", self.group_id, exc)
                self.rejoin_needed = True
            if time.monotonic() - self.last_heartbeat_ok > self.session_timeout_ms / 1000:
                self.coordinator_dead("no heartbeat answer within session.timeout.ms")

    async def _heartbeat(self) -> None:
        cls = HeartbeatRequest
        request = cls(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
        )
        generation = self.generation_id
        response = await self.request(request)
        if generation != self.generation_id:
            return  # a rebalance finished meanwhile: the answer is about the old generation
        action = _action(HEARTBEAT_ACTIONS, response.error_code)
        if action is GroupAction.OK:
            self.last_heartbeat_ok = time.monotonic()
            return
        log.info("group %s: heartbeat answered %s", self.group_id, code_name(response.error_code))
        if action in (GroupAction.REBALANCE, GroupAction.REJOIN, GroupAction.RESET_MEMBER):
            self.state = MemberState.UNJOINED
        self._apply(action, response.error_code, "Heartbeat")

    # ------------------------------------------------------------------ leaving

    async def leave_group(self, reason: str = "the consumer is being closed") -> None:
        """LeaveGroup for a dynamic member that joined; then the member is UNJOINED."""
        member_id = self.member_id
        self.state = MemberState.UNJOINED
        self.generation_id = -1
        self.rejoin_needed = True
        if self.group_instance_id is not None or not member_id or self.coordinator is None:
            return
        self.member_id = ""
        cls = LeaveGroupRequest
        try:
            conn = await self.connection()
            version = conn.api_version(ApiKey.LEAVE_GROUP)
            if version >= 3:  # v3+ names members in a list (KIP-345)
                identity = cls.MemberIdentity(member_id=member_id, reason=reason)
                request = cls(group_id=self.group_id, members=[identity])
            else:
                request = cls(group_id=self.group_id, member_id=member_id)
            response = await conn.send(request, version, timeout_s=self.request_timeout_s)
            if response.error_code:
                log.info(
                    "group %s: LeaveGroup answered %s",
                    self.group_id,
                    code_name(response.error_code),
                )
        except _TRANSPORT_ERRORS as exc:
            log.debug("group %s: LeaveGroup failed: %s", self.group_id, exc)

    # ------------------------------------------------------------------ offsets

    async def commit_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, int]:
        """OffsetCommit for this member's generation: an error code per partition."""
        cls = OffsetCommitRequest
        topic_cls = cls.OffsetCommitRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for tp, committed in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                topic_cls.OffsetCommitRequestPartition(
                    partition_index=tp.partition,
                    committed_offset=committed.offset,
                    committed_leader_epoch=committed.leader_epoch,
                    committed_metadata=committed.metadata,
                )
            )
        request = cls(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            retention_time_ms=-1,
            topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        response = await self.request(request, max_version=9)
        codes = dict.fromkeys(offsets, int(ErrorCode.UNKNOWN_SERVER_ERROR))
        for topic in response.topics:
            for p in topic.partitions:
                codes[TopicPartition(topic.name, p.partition_index)] = p.error_code
        for code in set(codes.values()):
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.coordinator_dead(code_name(code))
            elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self._apply(_action(HEARTBEAT_ACTIONS, code), code, "OffsetCommit")
            elif code == ErrorCode.REBALANCE_IN_PROGRESS:
                self.rejoin_needed = True
        return codes

    async def fetch_committed(
        self, partitions: list[TopicPartition], require_stable: bool
    ) -> dict[TopicPartition, tuple[int, OffsetAndMetadata | None]]:
        """OffsetFetch: per partition (error code, committed offset or None)."""
        conn = await self.connection()
        cls = OffsetFetchRequest
        version = conn.api_version(ApiKey.OFFSET_FETCH, max_version=9)
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        if version >= 8:
            group_cls = cls.OffsetFetchRequestGroup
            request = cls(
                groups=[
                    group_cls(
                        group_id=self.group_id,
                        member_id=None,
                        member_epoch=-1,
                        topics=[
                            group_cls.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                            for t, ps in by_topic.items()
                        ],
                    )
                ],
                require_stable=require_stable,
            )
        else:
            request = cls(
                group_id=self.group_id,
                topics=[
                    cls.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()
                ],
                require_stable=require_stable,
            )
        try:
            response = await conn.send(request, version, timeout_s=self.request_timeout_s)
        except _TRANSPORT_ERRORS as exc:
            self.coordinator_dead(exc)
            raise
        topics: list[_FetchedTopicV8] | list[_FetchedTopic]
        if version >= 8:
            group = response.groups[0] if response.groups else None
            top_error = (
                group.error_code if group is not None else int(ErrorCode.UNKNOWN_SERVER_ERROR)
            )
            topics = group.topics if group is not None else []
        else:
            top_error = response.error_code if version >= 2 else 0
            topics = response.topics
        out: dict[TopicPartition, tuple[int, OffsetAndMetadata | None]] = {
            tp: (top_error or int(ErrorCode.UNKNOWN_SERVER_ERROR), None) for tp in partitions
        }
        if top_error:
            if top_error in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.coordinator_dead(code_name(top_error))
            return out
        for topic in topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                committed = None
                if p.error_code == ErrorCode.NONE and p.committed_offset >= 0:
                    committed = OffsetAndMetadata(
                        p.committed_offset, p.metadata or "", p.committed_leader_epoch
                    )
                out[tp] = (p.error_code, committed)
        return out
