"""Changing configs at runtime, shared by AlterConfigs and IncrementalAlterConfigs.

A change is `(name, operation, value)` with Kafka's operations SET, DELETE, APPEND and SUBTRACT
(AlterConfigs sends only SETs and replaces a resource's whole set of overrides). Topic configs
are validated exactly as at creation (`log.config`) and, unless `validate_only`, stored
durably in the topic registry and applied to every partition before the answer. Broker
configs are static here: any change is INVALID_REQUEST naming the keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from onceflow.broker.configs_view import ConfigResourceType, unsupported_resource_type
from onceflow.log.config import TOPIC_CONFIG_TYPES, validate_topic_configs
from onceflow.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from onceflow.broker.state import BrokerState

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Change = tuple[str, int, str | None]
Outcome = tuple[ErrorCode, str | None]


class ConfigResource(Protocol):
    """A resource of an AlterConfigs-shaped request (AlterConfigs, IncrementalAlterConfigs)."""

    @property
    def resource_type(self) -> int: ...

    @property
    def resource_name(self) -> str: ...


_R = TypeVar("_R", bound=ConfigResource)
_R_co = TypeVar("_R_co", bound=ConfigResource, covariant=True)
_Out_co = TypeVar("_Out_co", covariant=True)


class ConfigRequest(Protocol[_R_co]):
    """An AlterConfigs-shaped request: its resources and validate_only."""

    @property
    def resources(self) -> Sequence[_R_co]: ...

    @property
    def validate_only(self) -> bool: ...


class ResultClass(Protocol[_Out_co]):
    """The generated class of one resource's answer."""

    def __call__(
        self, *, error_code: int, error_message: str | None, resource_type: int, resource_name: str
    ) -> _Out_co: ...


def _no_refusal(resource: ConfigResource) -> ErrorCode | None:
    return None


def alter_all(
    broker: BrokerState,
    request: ConfigRequest[_R],
    result_cls: ResultClass[_Out_co],
    changes_of: Callable[[_R], Sequence[Change]],
    *,
    replace: bool,
    refused: Callable[[_R], ErrorCode | None] = _no_refusal,
) -> list[_Out_co]:
    """One `result_cls` answer per resource of an AlterConfigs-shaped `request`;
    `changes_of(resource)` gives the resource's changes, `refused(resource)` the error of a
    resource the caller may not alter (checked before anything changes), else None."""
    out = []
    for resource in request.resources:
        error, message = refused(resource), None
        if error is None:
            error, message = alter(
                broker,
                resource.resource_type,
                resource.resource_name,
                changes_of(resource),
                replace=replace,
                validate_only=request.validate_only,
            )
        out.append(
            result_cls(
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return out


def alter(
    broker: BrokerState,
    resource_type: int,
    resource_name: str,
    changes: Sequence[Change],
    *,
    replace: bool,
    validate_only: bool,
) -> Outcome:
    """Apply `changes` to one resource; (error, message)."""
    names = [name for name, _, _ in changes]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    if resource_type == ConfigResourceType.BROKER:
        return _alter_broker(broker, resource_name, changes, validate_only)
    if resource_type != ConfigResourceType.TOPIC:
        return ErrorCode.INVALID_REQUEST, unsupported_resource_type(resource_type)
    info = broker.logs.topic(resource_name)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource_name} does not exist"
    overrides = {} if replace else dict(info.configs)
    effective = broker.logs.topic_config(resource_name).to_topic_properties()
    for name, operation, value in changes:
        error = _apply(overrides, effective, name, operation, value)
        if error is not None:
            return error
    message = validate_topic_configs(overrides)
    if message is not None:
        return ErrorCode.INVALID_CONFIG, message
    if validate_only:
        return ErrorCode.NONE, None
    diff: dict[str, str | None] = {k: None for k in info.configs if k not in overrides}
    diff.update(overrides)
    result = broker.logs.alter_topic_configs(resource_name, diff)
    return result.error, result.message


def _apply(
    overrides: dict[str, str],
    effective: dict[str, str],
    name: str,
    operation: int,
    value: str | None,
) -> Outcome | None:
    """One change to `overrides` in place; an error outcome, or None."""
    kind = TOPIC_CONFIG_TYPES.get(name)
    if kind is None:
        return ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}"
    if operation == DELETE:
        overrides.pop(name, None)
        return None
    if value is None:
        return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}"
    if operation == SET:
        overrides[name] = value
        return None
    if operation not in (APPEND, SUBTRACT):
        return ErrorCode.INVALID_REQUEST, f"Unknown config operation {operation} for {name}"
    if kind != "list":
        verb = "append" if operation == APPEND else "subtract"
        return (
            ErrorCode.INVALID_CONFIG,
            f"Config value {verb} is not allowed for config key: {name}",
        )
    current = [v for v in overrides.get(name, effective.get(name, "")).split(",") if v]
    given = [v.strip() for v in value.split(",") if v.strip()]
    if operation == APPEND:
        items = current + [v for v in given if v not in current]
    else:
        items = [v for v in current if v not in given]
    overrides[name] = ",".join(items)
    return None


def _alter_broker(
    broker: BrokerState, resource_name: str, changes: Sequence[Change], validate_only: bool
) -> Outcome:
    """Kafka's dynamic configs for features onceflow lacks are stored (no effect); onceflow's
    own broker configs are static."""
    if resource_name not in ("", str(broker.node_id)):
        return ErrorCode.INVALID_REQUEST, (
            f"Unexpected broker id, expected {broker.node_id} or empty string, "
            f"but received {resource_name}"
        )
    static = sorted(name for name, _, _ in changes if not broker.dynamic_configs.accepts(name))
    if static:
        return ErrorCode.INVALID_REQUEST, (
            f"Cannot update these configs dynamically: {', '.join(static)} (onceflow's broker "
            "configs are static: set them in the properties file or with --set and restart)"
        )
    diff: dict[str, str | None] = {}
    for name, operation, value in changes:
        if operation == DELETE:
            diff[name] = None
        elif operation == SET and value is not None:
            diff[name] = value
        else:
            return ErrorCode.INVALID_REQUEST, f"Cannot {_OPERATION_NAMES.get(operation)} {name}"
    if not validate_only and diff:
        broker.dynamic_configs.update(diff)
    return ErrorCode.NONE, None


_OPERATION_NAMES = {SET: "set a null value for", APPEND: "append to", SUBTRACT: "subtract from"}
