"""`BrokerState`: everything handlers share — config, identity, logs, durability, wake-ups.

Handlers reach it as `ctx.broker`. It wraps the `LogManager` (topics and partition logs), its
`GroupCommitter`, the `HighWatermarkNotifier` for long-polling fetches, the `ProducerIdManager`
(InitProducerId; its block file lives in the first data directory), the owners of producer ids
(`producer_id_binding`, `broker.producer_binding`; None when switched off), the `BrokerMetrics`
counters, the cluster id from `meta.properties`, the advertised address of each listener,
the SCRAM credential store (`security.credentials`, with the bootstrap users of
`onceflow.sasl.bootstrap.users` added when absent) and the ACL authorizer (`authorizer`,
None unless `authorizer.class.name` is set; its ACLs are loaded from
`security.acl_store` at open, and changed only through `change_acls`). It has no I/O of
its own beyond what it delegates, so handler tests build one on a temporary directory with
`BrokerState.open`.

Wake-ups: the notifier subscribes once to the `LogManager`'s offsets events, so a
long-polling fetch is woken whenever what it may read changes: its partition's high watermark
moves (after an fsync round, or at once with `flush.on.ack=false`), its last stable offset
moves (a transaction marker, whoever writes it), its log start offset moves (retention,
DeleteRecords), the log goes offline or the topic is deleted. Code that appends to a log does
nothing more; `begin_stop` wakes every fetch.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TypeVar

from onceflow.broker.config import BrokerConfig, ConfigError
from onceflow.broker.dynamic_configs import DynamicBrokerConfigs
from onceflow.broker.listeners import Listener
from onceflow.broker.meta import load_or_create
from onceflow.broker.metrics import BrokerMetrics
from onceflow.broker.notifier import HighWatermarkNotifier
from onceflow.broker.producer_binding import BINDING_CONFIG, ProducerIdBinding, open_binding
from onceflow.broker.transactions import BrokerTransactions
from onceflow.coordinator.group.config import GroupConfig
from onceflow.coordinator.group.coordinator import GroupCoordinator
from onceflow.coordinator.internal_topics import is_internal
from onceflow.coordinator.producer_id import ProducerIdManager, ProducerIdStateError
from onceflow.log.fsutil import DirectoryLock
from onceflow.log.manager import LogManager, TopicInfo, TopicResult
from onceflow.log.partition import PartitionLog
from onceflow.protocol.errors import ErrorCode
from onceflow.security.acl_store import AclStore, AclStoreCorruptError
from onceflow.security.authorizer import AclAuthorizer, AclUpdate
from onceflow.security.bootstrap import BOOTSTRAP_USERS_CONFIG, bootstrap_users
from onceflow.security.credentials import CredentialStoreCorruptError, ScramCredentialStore

log = logging.getLogger("onceflow.broker")
_T = TypeVar("_T")


class BrokerState:
    """Shared broker state; create with `open`, release with `close`."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster_id: str,
        logs: LogManager,
        advertised: Listener,
        producer_ids: ProducerIdManager,
        authorizer: AclAuthorizer | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = cluster_id
        self.logs = logs
        self.committer = logs.committer
        self.advertised = advertised  # of the first listener
        self.advertised_by_listener: dict[str, Listener] = {}  # set by the server once bound
        self.credentials: ScramCredentialStore | None = None  # set by `open`
        self.notifier = HighWatermarkNotifier()
        logs.add_offsets_listener(self.notifier.notify)
        self.producer_ids = producer_ids
        # producer id -> owning principal; None with onceflow.producer.id.principal.binding.enable
        # off (set by `open`)
        self.producer_id_binding: ProducerIdBinding | None = None
        self.dynamic_configs = DynamicBrokerConfigs(config.data_dir)  # accepted, no effect
        # Classic consumer groups; `load_coordinators` reads __consumer_offsets on the loop.
        self.group_coordinator = GroupCoordinator(GroupConfig.from_properties(dict(config.items())))
        self.metrics = BrokerMetrics()
        # The transaction coordinator; `await transactions.start()` on the loop before serving.
        # Markers on __consumer_offsets settle the group coordinator's transactional offsets.
        self.transactions = BrokerTransactions(
            logs,
            producer_ids,
            dict(config.items()),
            on_offsets_marker=self.group_coordinator.on_txn_marker,
        )
        self.authorizer = authorizer
        self.acl_store = AclStore(config.data_dir)
        self._acl_lock = asyncio.Lock()  # one ACL change at a time (store, then apply)
        self.stopping = False
        self.lock: DirectoryLock | None = None  # the data directory's, set by `open`
        self._names_by_id: dict[uuid.UUID, str] = {}

    @classmethod
    def open(cls, config: BrokerConfig, advertised: Listener | None = None) -> BrokerState:
        """Load (or create) the data directory: identity, topic registry, every partition.

        Raises ConfigError for a data directory of another node, OSError for I/O failures
        (also for an unreadable producer-id block file: ids that may repeat are worse than not
        starting).
        """
        lock = DirectoryLock(config.data_dir)  # before anything reads or writes the directory
        try:
            meta = load_or_create(config.data_dir, config.node_id)
            try:
                producer_ids = ProducerIdManager(config.data_dir)
            except ProducerIdStateError as exc:
                raise OSError(f"cannot load producer ids: {exc}") from exc
            authorizer = _load_authorizer(config)
            binding = open_binding(config.data_dir, config.get(BINDING_CONFIG))
            credentials = _open_credentials(config)
            logs = LogManager(config.data_dir, config.log_properties())
            logs.start()
        except BaseException:
            lock.release()
            raise
        address = advertised or config.advertised_listener or config.listener
        state = cls(config, meta.cluster_id, logs, address, producer_ids, authorizer)
        state.lock = lock
        state.credentials = credentials
        state.producer_id_binding = binding
        return state

    def credential_store(self) -> ScramCredentialStore:
        """The SCRAM credential store (`open` sets it before any request)."""
        if self.credentials is None:
            raise RuntimeError("the broker state is not open")
        return self.credentials

    def advertised_for(self, listener_name: str | None) -> Listener:
        """The address clients of `listener_name` are given (None: the first listener's)."""
        if listener_name is None:
            return self.advertised
        return self.advertised_by_listener.get(listener_name, self.advertised)

    # -- partitions ----------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The log of `topic`/`partition`, or None when it does not exist."""
        return self.logs.get_log(topic, partition)

    def expire_producers(self) -> int:
        """Drop producer ids idle for `producer.id.expiration.ms` on every log (the broker's
        periodic task calls this every `producer.id.expiration.check.interval.ms`)."""
        removed = self.logs.remove_expired_producers()
        if removed:
            self.metrics.expired_producer_ids += removed
            log.info("expired %d idle producer id(s)", removed)
        return removed

    # -- topics --------------------------------------------------------------------------------

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic with `topic_id`, or None (a cached index, rebuilt when it is stale)."""
        name = self._names_by_id.get(topic_id)
        info = self.logs.topic(name) if name is not None else None
        if info is not None and info.topic_id == topic_id:
            return info
        self._names_by_id = {t.topic_id: t.name for t in self.logs.topics()}
        name = self._names_by_id.get(topic_id)
        return self.logs.topic(name) if name is not None else None

    def auto_create_topic(self, name: str) -> TopicResult:
        """Create `name` with `num.partitions` partitions (auto.create.topics.enable).

        Never an internal topic: its coordinator creates it, with its own partition count."""
        if is_internal(name):
            return TopicResult(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name} is created by its coordinator"
            )
        result = self.logs.create_topic(name, self.config.num_partitions)
        if result.error == 0:
            log.info("auto-created topic %s", name)
        return result

    def delete_topic(self, name: str) -> TopicResult:
        """Delete a topic (the log manager's event wakes fetches reading it: they then see it
        is gone)."""
        return self.logs.delete_topic(name)

    # -- coordinators --------------------------------------------------------------------------

    def load_coordinators(self) -> None:
        """Rebuild groups and committed offsets from `__consumer_offsets` (call on the running
        event loop before serving, so the coordinator's timers attach to it)."""
        self.group_coordinator.load(self.logs)

    # -- ACLs ----------------------------------------------------------------------------------

    async def change_acls(
        self, prepare: Callable[[AclAuthorizer], tuple[list[_T], AclUpdate]]
    ) -> list[_T]:
        """Run `prepare` (the authorizer's `prepare_create_acls`/`prepare_delete_acls`), store
        the ACL set it leads to (fsync, in a worker thread), then apply it; the results.
        Changes are serialized; OSError when the set cannot be stored (nothing changes)."""
        authorizer = self.authorizer
        if authorizer is None:
            raise RuntimeError("change_acls without an authorizer")
        async with self._acl_lock:
            results, update = prepare(authorizer)
            if update.added or update.removed:
                await asyncio.to_thread(self.acl_store.commit, authorizer, update)
            else:
                authorizer.complete_update(update)
            return results

    # -- shutdown ------------------------------------------------------------------------------

    def begin_stop(self) -> None:
        """Make long-polling fetches answer now; no new waits start."""
        self.stopping = True
        self.notifier.notify_all()

    async def close(self) -> None:
        """Finish pending fsync rounds, flush and close every log (clean shutdown marker)."""
        self.begin_stop()
        await self.transactions.close()
        await self.group_coordinator.shutdown()
        await self.logs.shutdown()
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def _load_authorizer(config: BrokerConfig) -> AclAuthorizer | None:
    """The ACL authorizer with the stored ACLs, or None when `authorizer.class.name` is empty.
    A corrupt ACL file is a startup error (OSError), never an empty set."""
    if not config.authorizer_enabled:
        return None
    try:
        bindings = AclStore(config.data_dir).load()
    except AclStoreCorruptError as exc:
        raise OSError(str(exc)) from exc
    try:
        authorizer = AclAuthorizer.from_config(dict(config.items()), bindings)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    log.info(
        "authorizer on: %d ACL(s), super.users %s, allow.everyone.if.no.acl.found=%s",
        len(authorizer),
        sorted(authorizer.super_users) or "none",
        str(authorizer.allow_everyone_if_no_acl_found).lower(),
    )
    return authorizer


def _open_credentials(config: BrokerConfig) -> ScramCredentialStore:
    """The data directory's SCRAM users, with the configured bootstrap users added when absent
    (blocking: PBKDF2 and fsync, before any listener opens)."""
    try:
        credentials = ScramCredentialStore(config.data_dir)
    except CredentialStoreCorruptError as exc:
        raise OSError(f"cannot load SCRAM credentials: {exc}") from exc
    users = config.get(BOOTSTRAP_USERS_CONFIG)
    if users:
        try:
            added = bootstrap_users(credentials, users)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        for name, mechanism in added:
            log.info("added bootstrap SCRAM user %s (%s)", name, mechanism.mechanism_name)
    return credentials
