"""Dynamic broker configs: Kafka's per-broker settings that AlterConfigs may change at runtime.

onceflow's own broker settings are read at start and stay static (a change is refused). Kafka
also lets clients set, per broker, configs that belong to features onceflow does not have:
thread pools, the log cleaner, listeners' SSL/SASL settings, replication quotas. Those in
`ACCEPTED` are taken as Kafka takes them, stored durably in `<data dir>/dynamic-broker-configs.json`
and described with source DYNAMIC_BROKER_CONFIG, so tools that set them (librdkafka's admin tests,
Kafka's own kafka-configs.sh scripts) work, but they change nothing here (docs/deviations.md).
"""

from __future__ import annotations

import json
import os
import re
from typing import Final

from onceflow.log.fsutil import write_file_atomically

FILE_NAME: Final = "dynamic-broker-configs.json"

# Kafka's dynamically updatable per-broker configs (DynamicBrokerConfig) for features onceflow
# does not have: accepted and stored, no effect
ACCEPTED: Final = re.compile(
    r"(background\.threads|num\.io\.threads|num\.network\.threads|num\.replica\.fetchers"
    r"|num\.recovery\.threads\.per\.data\.dir|max\.connections|max\.connections\.per\.ip"
    r"|max\.connections\.per\.ip\.overrides|max\.connection\.creation\.rate"
    r"|log\.cleaner\.[a-z.]+|follower\.replication\.throttled\.rate"
    r"|leader\.replication\.throttled\.rate|replica\.alter\.log\.dirs\.io\.max\.bytes\.per\.second"
    r"|(listener\.name\.[a-z0-9_-]+\.)?(ssl|sasl)\.[a-z0-9.]+)"
)


class DynamicBrokerConfigs:
    """The stored dynamic broker configs of this node."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, FILE_NAME)
        try:
            with open(self.path, encoding="utf-8") as f:
                self.values: dict[str, str] = dict(json.load(f))
        except FileNotFoundError:
            self.values = {}

    @staticmethod
    def accepts(name: str) -> bool:
        return ACCEPTED.fullmatch(name) is not None

    def update(self, changes: dict[str, str | None]) -> None:
        """Set (value) or remove (None) entries, durably, all or nothing."""
        values = dict(self.values)
        for name, value in changes.items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        data = json.dumps(dict(sorted(values.items())), indent=1).encode() + b"\n"
        write_file_atomically(self.path, data)
        self.values = values
