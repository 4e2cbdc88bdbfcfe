"""What became of a prepared transaction whose commit failed on the driver.

An EndTxn that timed out or lost its connection may have committed or not; reporting either
without checking misleads an operator (one who reprocesses "aborted" rows by hand duplicates
them). `resolve_commit` asks the cluster, in this order:

1. the task's progress marker (read without requireStable): it names the producer id and
   epoch of the transaction that committed the share, so a marker of this batch with this
   producer means COMMITTED;
2. DescribeTransactions on the transactional id: the same producer id and epoch still
   `Ongoing` means OPEN (the commit can be sent again); `PrepareCommit` means the commit was
   decided and is being completed (COMMITTED once the marker shows it); anything else (a new
   epoch, `PrepareAbort`, `CompleteAbort`, `Empty`) means ABORTED;
3. when neither answers, UNKNOWN.
"""

from __future__ import annotations

import enum
import logging
import time
from typing import TYPE_CHECKING

from onceflow.client.errors import KafkaError
from onceflow.spark.options import SinkOptions
from onceflow.spark.twophase import admin_for, read_marker, timeout_s

if TYPE_CHECKING:
    from onceflow.spark.twophase import PreparedTransaction

__all__ = ["CommitOutcome", "resolve_commit"]

log = logging.getLogger(__name__)

PREPARE_COMMIT_WAIT_S = 0.2  # between marker reads while the coordinator completes a commit


class CommitOutcome(enum.Enum):
    COMMITTED = "committed"
    OPEN = "still open"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


def _committed(options: SinkOptions, message: PreparedTransaction) -> bool:
    marker = read_marker(options, message.prefix or "", message.partition_id,
                         timeout_s(options), stable=False)  # fmt: skip
    return (
        marker is not None
        and marker.batch_id == message.batch_id
        and marker.producer == (message.producer_id, message.producer_epoch)
    )


def resolve_commit(options: SinkOptions, message: PreparedTransaction) -> CommitOutcome:
    """Whether `message`'s transaction committed, is still open, or was aborted (see the
    module docstring); UNKNOWN when the cluster cannot tell us."""
    deadline = time.monotonic() + timeout_s(options)
    try:
        while True:
            if _committed(options, message):
                return CommitOutcome.COMMITTED
            txn_id = message.transactional_id
            described = admin_for(options).describe_transactions([txn_id])[txn_id]
            same = described.producer_id == message.producer_id
            if same and described.state == "Ongoing":
                if described.producer_epoch == message.producer_epoch:
                    return CommitOutcome.OPEN
                return CommitOutcome.ABORTED  # a later attempt's transaction
            if not (same and described.state in ("PrepareCommit", "CompleteCommit")):
                return CommitOutcome.ABORTED
            if time.monotonic() >= deadline:  # decided, but the marker is not readable yet
                return CommitOutcome.UNKNOWN
            time.sleep(PREPARE_COMMIT_WAIT_S)
    except (KafkaError, OSError) as exc:
        log.warning("could not learn the outcome of %s's commit: %s", message.transactional_id,
                    exc)  # fmt: skip
        return CommitOutcome.UNKNOWN
