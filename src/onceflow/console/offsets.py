"""Per-partition offsets through ListOffsets: log start, high watermark and last stable offset
(read_committed's latest, KIP-98)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from onceflow.client.admin import AdminClient, OffsetSpec
from onceflow.common import TopicPartition
from onceflow.protocol.errors import ErrorCode

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True)
class PartitionOffsets:
    """One partition's offsets; -1 where ListOffsets answered `error` (its error name)."""

    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    error: str | None = None

    @property
    def lso_lag(self) -> int:
        """Records between the last stable offset and the high watermark: written but not yet
        readable by read_committed consumers."""
        if self.error is not None:
            return 0
        return self.high_watermark - self.last_stable_offset


def partition_offsets(
    admin: AdminClient, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, PartitionOffsets]:
    """Three ListOffsets rounds (earliest; latest uncommitted; latest committed) for all the
    partitions at once."""
    wanted = list(partitions)
    if not wanted:
        return {}
    earliest = admin.list_offsets(dict.fromkeys(wanted, OffsetSpec.earliest()))
    latest = dict.fromkeys(wanted, OffsetSpec.latest())
    high = admin.list_offsets(latest, isolation_level=READ_UNCOMMITTED)
    stable = admin.list_offsets(latest, isolation_level=READ_COMMITTED)
    out = {}
    for tp in wanted:
        answers = (earliest[tp], high[tp], stable[tp])
        codes = [a.error_code for a in answers if a.error_code != ErrorCode.NONE]
        error = codes[0].name if codes else None
        out[tp] = PartitionOffsets(earliest[tp].offset, high[tp].offset, stable[tp].offset, error)
    return out
