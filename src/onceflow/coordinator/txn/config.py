"""Transaction coordinator settings, by Kafka's broker config names and defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from onceflow.coordinator.txn.faults import AFTER_PREPARE_COMMIT, CRASH_AFTER_PREPARE_ENV

__all__ = ["CRASH_AFTER_PREPARE_ENV", "TxnConfig"]

_TRUE = ("true", "1", "yes")


@dataclass(frozen=True)
class TxnConfig:
    """Settings of the transaction coordinator (`from_properties` reads Kafka's keys).

    `crash_after_prepare` (`onceflow.test.crash.after.prepare`, or the environment variable
    ONCEFLOW_TEST_CRASH_AFTER_PREPARE=true) is TEST-ONLY: it installs the fault point
    `faults.AFTER_PREPARE_COMMIT`, where the process exits with status 137 right after a
    PREPARE_COMMIT is durable, before any marker is written, so fault tests can check that
    recovery completes the commit. Never set it in production.
    """

    transaction_max_timeout_ms: int = 900_000
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104_857_600
    transactional_id_expiration_ms: int = 604_800_000
    abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    offsets_topic_num_partitions: int = 50
    crash_after_prepare: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> TxnConfig:
        """Read Kafka's keys from broker properties; missing keys keep Kafka's defaults.

        `transactional.id.expiration.check.interval.ms` is accepted as another name for
        `transaction.remove.expired.transaction.cleanup.interval.ms`."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            for key in _KEYS[f.name]:
                if props.get(key) is not None:
                    values[f.name] = _convert(f.type, props[key], key)
                    break
        if os.environ.get(CRASH_AFTER_PREPARE_ENV, "").strip().lower() in _TRUE:
            values["crash_after_prepare"] = True
        return cls(**values)


_KEYS: Mapping[str, tuple[str, ...]] = {
    "transaction_max_timeout_ms": ("transaction.max.timeout.ms",),
    "transaction_state_log_num_partitions": ("transaction.state.log.num.partitions",),
    "transaction_state_log_segment_bytes": ("transaction.state.log.segment.bytes",),
    "transactional_id_expiration_ms": ("transactional.id.expiration.ms",),
    "abort_timed_out_transaction_cleanup_interval_ms": (
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    ),
    "remove_expired_transaction_cleanup_interval_ms": (
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "transactional.id.expiration.check.interval.ms",
    ),
    "offsets_topic_num_partitions": ("offsets.topic.num.partitions",),
    "crash_after_prepare": (AFTER_PREPARE_COMMIT,),
}


def _convert(kind: Any, raw: Any, key: str) -> Any:
    if kind in (bool, "bool"):
        return raw if isinstance(raw, bool) else str(raw).strip().lower() in _TRUE
    value = int(str(raw).strip())
    if value <= 0:
        raise ValueError(f"{key} must be positive, got {value}")
    return value
