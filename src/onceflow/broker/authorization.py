"""What each API needs from the ACL authorizer: Kafka's `KafkaApis` rules as one table.

`RULES` is the one place to read what a request must be allowed to do: for each API, the
checks it makes, each an (operation, resource type) on a named part of the request and the
error a denial answers. Handlers check through `denied(ctx, api, check, name)`, which reads the
table, so a handler's check is one line and the table is what is enforced. A rule whose denial
is no error (a filter, a fallback to another grant) says so in `answer`; the follower Fetch's
CLUSTER_ACTION has no entry, as this broker has no followers. With no authorizer
(`authorizer.class.name` empty, the default) every check passes at the cost of one attribute
read, and behaviour is exactly that of a broker without ACLs.

A denial changes nothing: handlers check before any append, coordinator call or state change,
and answer the table's error for the denied part (or the whole request, where Kafka does).

Where Kafka accepts one of two grants, the table lists both and the handler says so:
auto-creating Metadata accepts CREATE on the CLUSTER or on the topic; an
idempotent InitProducerId accepts IDEMPOTENT_WRITE on the CLUSTER or WRITE on some topic
(`AclAuthorizer.authorize_by_resource_type`, Kafka's `authorizeByResourceType`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from onceflow.broker.context import RequestContext

_Op = AclOperation
_R = ResourceType
_A = ApiKey

# the error a denial on each resource type answers
DENIED_ERRORS: Final[Mapping[ResourceType, ErrorCode]] = MappingProxyType(
    {
        _R.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        _R.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
        _R.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        _R.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)


@dataclass(frozen=True, slots=True)
class Rule:
    """One check of an API: `operation` on the `resource_type` named by `applies_to`."""

    operation: AclOperation
    resource_type: ResourceType
    applies_to: str  # what in the request names the resource (for the docs)
    # what a denial does when it is no error code (a filter, a fallback), for the docs
    answer: str | None = None

    @property
    def error(self) -> ErrorCode:
        return DENIED_ERRORS[self.resource_type]


def _rules(
    **checks: tuple[AclOperation, ResourceType, str] | tuple[AclOperation, ResourceType, str, str],
) -> Mapping[str, Rule]:
    return MappingProxyType({name: Rule(*spec) for name, spec in checks.items()})


_TOPIC = (_Op.READ, _R.TOPIC, "each topic")
_LEFT_OUT = "left out of the answer"
_GROUP_READ = _rules(group=(_Op.READ, _R.GROUP, "group_id"))
_ALTER_CONFIGS = _rules(
    topic=(_Op.ALTER_CONFIGS, _R.TOPIC, "a TOPIC resource"),
    cluster=(_Op.ALTER_CONFIGS, _R.CLUSTER, "a BROKER resource"),
)

# API -> check name -> rule. The check names are what handlers pass to `denied`.
RULES: Final[Mapping[ApiKey, Mapping[str, Rule]]] = MappingProxyType(
    {
        _A.PRODUCE: _rules(
            transactional_id=(
                _Op.WRITE,
                _R.TRANSACTIONAL_ID,
                "transactional_id, when a batch is transactional (whole request)",
            ),
            topic=(_Op.WRITE, _R.TOPIC, "each topic (also covers idempotent batches)"),
        ),
        _A.FETCH: _rules(topic=_TOPIC),
        _A.METADATA: _rules(
            topic=(_Op.DESCRIBE, _R.TOPIC, "each topic (left out of an all-topics answer)"),
            create=(_Op.CREATE, _R.TOPIC, "a missing topic to auto-create (or CLUSTER CREATE)"),
            cluster_create=(_Op.CREATE, _R.CLUSTER, "auto-creating any topic"),
        ),
        _A.OFFSET_COMMIT: _rules(group=(_Op.READ, _R.GROUP, "group_id"), topic=_TOPIC),
        _A.FIND_COORDINATOR: _rules(
            group=(_Op.DESCRIBE, _R.GROUP, "a group key"),
            transactional_id=(_Op.DESCRIBE, _R.TRANSACTIONAL_ID, "a transaction key"),
        ),
        _A.INIT_PRODUCER_ID: _rules(
            transactional_id=(_Op.WRITE, _R.TRANSACTIONAL_ID, "transactional_id"),
            idempotent=(
                _Op.IDEMPOTENT_WRITE,
                _R.CLUSTER,
                "an idempotent producer (or WRITE on some topic)",
            ),
        ),
        _A.ADD_PARTITIONS_TO_TXN: _rules(
            transactional_id=(_Op.WRITE, _R.TRANSACTIONAL_ID, "transactional_id (v0-3)"),
            topic=(_Op.WRITE, _R.TOPIC, "each topic (v0-3)"),
            cluster=(_Op.CLUSTER_ACTION, _R.CLUSTER, "a v4+ (broker-to-broker) request"),
        ),
        _A.ADD_OFFSETS_TO_TXN: _rules(
            transactional_id=(_Op.WRITE, _R.TRANSACTIONAL_ID, "transactional_id"),
            group=(_Op.READ, _R.GROUP, "group_id"),
        ),
        _A.END_TXN: _rules(transactional_id=(_Op.WRITE, _R.TRANSACTIONAL_ID, "transactional_id")),
        _A.WRITE_TXN_MARKERS: _rules(
            cluster=(_Op.CLUSTER_ACTION, _R.CLUSTER, "every request (and the loopback switch)")
        ),
        _A.TXN_OFFSET_COMMIT: _rules(
            transactional_id=(_Op.WRITE, _R.TRANSACTIONAL_ID, "transactional_id"),
            group=(_Op.READ, _R.GROUP, "group_id"),
            topic=_TOPIC,
        ),
        _A.CREATE_ACLS: _rules(cluster=(_Op.ALTER, _R.CLUSTER, "every request")),
        _A.DESCRIBE_ACLS: _rules(cluster=(_Op.DESCRIBE, _R.CLUSTER, "every request")),
        _A.DELETE_ACLS: _rules(cluster=(_Op.ALTER, _R.CLUSTER, "every request")),
        _A.LIST_OFFSETS: _rules(topic=(_Op.DESCRIBE, _R.TOPIC, "each topic")),
        _A.OFFSET_FETCH: _rules(
            group=(_Op.DESCRIBE, _R.GROUP, "each group_id"),
            topic=(_Op.DESCRIBE, _R.TOPIC, "each topic (left out of an all-topics answer)"),
        ),
        _A.JOIN_GROUP: _GROUP_READ,
        _A.SYNC_GROUP: _GROUP_READ,
        _A.HEARTBEAT: _GROUP_READ,
        _A.LEAVE_GROUP: _GROUP_READ,
        _A.DESCRIBE_GROUPS: _rules(group=(_Op.DESCRIBE, _R.GROUP, "each group")),
        _A.LIST_GROUPS: _rules(
            cluster=(
                _Op.DESCRIBE,
                _R.CLUSTER,
                "every request: lists all groups",
                "only the groups the caller may DESCRIBE",
            ),
            group=(
                _Op.DESCRIBE,
                _R.GROUP,
                "each group listed (without CLUSTER DESCRIBE)",
                _LEFT_OUT,
            ),
        ),
        _A.DELETE_GROUPS: _rules(group=(_Op.DELETE, _R.GROUP, "each group")),
        _A.OFFSET_DELETE: _rules(group=(_Op.DELETE, _R.GROUP, "group_id"), topic=_TOPIC),
        _A.CREATE_TOPICS: _rules(
            cluster=(_Op.CREATE, _R.CLUSTER, "every topic", "CREATE on each topic is asked"),
            topic=(_Op.CREATE, _R.TOPIC, "each topic (without CLUSTER CREATE)"),
            describe_configs=(
                _Op.DESCRIBE_CONFIGS,
                _R.TOPIC,
                "each topic's configs in the answer (v5+)",
                "topic_config_error_code TOPIC_AUTHORIZATION_FAILED, configs null",
            ),
        ),
        _A.DELETE_TOPICS: _rules(
            cluster=(_Op.DELETE, _R.CLUSTER, "every topic", "DESCRIBE and DELETE on each topic"),
            describe=(
                _Op.DESCRIBE,
                _R.TOPIC,
                "each topic, before saying whether it exists (named by id: name null)",
            ),
            topic=(_Op.DELETE, _R.TOPIC, "each topic (without CLUSTER DELETE)"),
        ),
        _A.DELETE_RECORDS: _rules(topic=(_Op.DELETE, _R.TOPIC, "each topic")),
        _A.CREATE_PARTITIONS: _rules(topic=(_Op.ALTER, _R.TOPIC, "each topic")),
        _A.DESCRIBE_CONFIGS: _rules(
            topic=(_Op.DESCRIBE_CONFIGS, _R.TOPIC, "a TOPIC resource"),
            cluster=(_Op.DESCRIBE_CONFIGS, _R.CLUSTER, "a BROKER resource"),
        ),
        _A.ALTER_CONFIGS: _ALTER_CONFIGS,
        _A.INCREMENTAL_ALTER_CONFIGS: _ALTER_CONFIGS,
        _A.DESCRIBE_CLUSTER: _rules(
            cluster=(
                _Op.DESCRIBE,
                _R.CLUSTER,
                "cluster_authorized_operations (the request itself is not checked)",
                "cluster_authorized_operations 0",
            )
        ),
        _A.DESCRIBE_LOG_DIRS: _rules(cluster=(_Op.DESCRIBE, _R.CLUSTER, "every request")),
        _A.DESCRIBE_PRODUCERS: _rules(topic=_TOPIC),
        _A.DESCRIBE_TOPIC_PARTITIONS: _rules(
            topic=(_Op.DESCRIBE, _R.TOPIC, "each topic (left out of an all-topics answer)"),
        ),
        _A.DESCRIBE_TRANSACTIONS: _rules(
            transactional_id=(_Op.DESCRIBE, _R.TRANSACTIONAL_ID, "each transactional id"),
            topic=(_Op.DESCRIBE, _R.TOPIC, "each topic of a transaction", _LEFT_OUT),
        ),
        _A.LIST_TRANSACTIONS: _rules(
            transactional_id=(_Op.DESCRIBE, _R.TRANSACTIONAL_ID, "each listed id", _LEFT_OUT)
        ),
        _A.DESCRIBE_USER_SCRAM_CREDENTIALS: _rules(
            cluster=(_Op.DESCRIBE, _R.CLUSTER, "every request")
        ),
        _A.ALTER_USER_SCRAM_CREDENTIALS: _rules(cluster=(_Op.ALTER, _R.CLUSTER, "every request")),
    }
)


def enabled(ctx: RequestContext) -> bool:
    """True when the broker checks ACLs."""
    return ctx.broker.authorizer is not None


def allowed(
    ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
) -> bool:
    """May the caller of `ctx` perform `operation` on the resource? True with no authorizer."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, ctx.client_host, operation, resource_type, name)


def denied(
    ctx: RequestContext, api: ApiKey, check: str, name: str | None = CLUSTER_NAME
) -> ErrorCode | None:
    """The error of `RULES[api][check]` when the caller may not do it on `name`, else None.
    A None name (a null transactional id, group) is denied when the authorizer is on."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return None
    rule = RULES[api][check]
    if name is not None and authorizer.authorize(
        ctx.principal, ctx.client_host, rule.operation, rule.resource_type, name
    ):
        return None
    return rule.error


def denied_names(
    ctx: RequestContext, api: ApiKey, check: str, names: Iterable[str]
) -> frozenset[str]:
    """The names among `names` that `RULES[api][check]` denies (empty with no authorizer)."""
    if ctx.broker.authorizer is None:
        return frozenset()
    return frozenset(n for n in set(names) if denied(ctx, api, check, n) is not None)


def allowed_names(ctx: RequestContext, api: ApiKey, check: str, names: Iterable[str]) -> list[str]:
    """`names` without those `RULES[api][check]` denies, in order (a filter: ListGroups,
    ListTransactions, all-topics OffsetFetch)."""
    if ctx.broker.authorizer is None:
        return list(names)
    return [n for n in names if denied(ctx, api, check, n) is None]


# ConfigResource.Type -> the check of a config API that guards it (BROKER, BROKER_LOGGER: cluster)
_CONFIG_CHECKS: Final[Mapping[int, str]] = MappingProxyType(
    {2: "topic", 4: "cluster", 8: "cluster"}
)


def denied_config(
    ctx: RequestContext, api: ApiKey, resource_type: int, name: str
) -> ErrorCode | None:
    """The denial of a config resource for DescribeConfigs / (Incremental)AlterConfigs (topics
    by name, broker resources on the CLUSTER); None for types the handler refuses itself."""
    check = _CONFIG_CHECKS.get(resource_type)
    if check is None:
        return None
    return denied(ctx, api, check, name if check == "topic" else CLUSTER_NAME)


def may_write_some_topic(ctx: RequestContext) -> bool:
    """May the caller WRITE some topic (Kafka's alternative to IDEMPOTENT_WRITE)?"""
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize_by_resource_type(
        ctx.principal, ctx.client_host, AclOperation.WRITE, ResourceType.TOPIC
    )


def rules_table_markdown() -> str:
    """`RULES` as a Markdown table (docs/security.md)."""
    lines = ["| API | operation | resource | on | denied answers |", "|---|---|---|---|---|"]
    for api, checks in RULES.items():
        for rule in checks.values():
            lines.append(
                f"| {api.name} | {rule.operation.name} | {rule.resource_type.name} "
                f"| {rule.applies_to} | {rule.answer or rule.error.name} |"
            )
    return "\n".join(lines) + "\n"
