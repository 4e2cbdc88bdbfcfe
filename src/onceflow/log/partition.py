"""One partition's log: segments in `<data dir>/<topic>-<partition>`, appends, reads, retention.

`PartitionLog` is driven from the broker's event loop and is put together from one module per
path, each readable alone:

- partition_base.py (`PartitionLogBase`): the segments and offsets (log start, end, flushed,
  high watermark, last stable offset), the offsets events, `flush` (from the group-commit
  worker thread, `log.durability`), the cleaner's segment swap, truncation, load and close;
- partition_append.py (`PartitionAppend`): `append`, offsets assigned by patching each batch's
  base offset (outside the CRC), the producer-state checks and transaction markers, rolls;
- partition_read.py (`PartitionRead`): `read` (whole batches via `pread`, never past the high
  watermark), aborted transactions for read_committed, `offset_for_timestamp`;
- partition_retention.py (`PartitionRetention`): retention and DeleteRecords, which move the
  log start offset, and its `log-start-offset` checkpoint.

With `flush.on.ack` (the default) the high watermark is the flushed offset, so consumers never
see a record that a crash could take back. `last_stable_offset` is the first offset of the
oldest open transaction, capped by the high watermark. Producer-state snapshots
(`<offset>.snapshot`, `log.producer_snapshot`) are taken on roll and on close; on open the
state is rebuilt from the newest usable one plus the log (`log.producer_replay`).
"""

from __future__ import annotations

from onceflow.log.partition_append import PartitionAppend
from onceflow.log.partition_read import PartitionRead
from onceflow.log.partition_retention import PartitionRetention

__all__ = ["PartitionLog"]


class PartitionLog(PartitionAppend, PartitionRead, PartitionRetention):
    """The log of one partition. Everything but `flush` runs on one thread (the event loop)."""
