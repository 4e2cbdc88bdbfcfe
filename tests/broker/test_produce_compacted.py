"""Produce to compacted topics: every record needs a key (Kafka's LogValidator.validateKey)."""

from __future__ import annotations

import pytest

from broker.broker_helpers import (
    PRODUCE_VERSIONS,
    create,
    produce_partitions,
)
from onceflow.protocol.errors import ErrorCode
from onceflow.records.builder import BatchBuilder

KEYLESS = (1, 4, 5)


def batch_with_keyless(n: int, keyless=KEYLESS, **kwargs):
    builder = BatchBuilder(**kwargs)
    for i in range(n):
        builder.append(None, None if i in keyless else b"k%d" % i, b"v%d" % i)
    return builder.build()


def produce(state, version, batch, topic="t"):
    return produce_partitions(state, topic, {0: batch}, version)[(topic, 0)]


# none, gzip, zstd (v7+): keys are checked after decompressing
CASES = [(v, c) for v in PRODUCE_VERSIONS for c in (0, 1, 4) if c != 4 or v >= 7]


@pytest.mark.parametrize(("version", "codec"), CASES)
def test_keyless_records_on_a_compacted_topic_reject_the_whole_batch(state, version, codec):
    create(state, "t", 1, **{"cleanup.policy": "compact"})
    answer = produce(state, version, batch_with_keyless(8, compression=codec))
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert answer.base_offset == -1
    assert state.get_log("t", 0).log_end_offset == 0
    if version >= 8:
        message = "Compacted topic cannot accept message without key in topic partition t-0"
        assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
            (i, message) for i in KEYLESS
        ]
        assert answer.error_message.startswith(
            "One or more records have been rejected due to 3 record errors"
        )


@pytest.mark.parametrize("policy", ["compact", "compact,delete", "delete"])
def test_keyed_records_are_accepted_and_keyless_ones_only_where_not_compacted(state, policy):
    create(state, "t", 1, **{"cleanup.policy": policy})
    keyed = produce(state, 9, batch_with_keyless(4, keyless=()))
    keyless = produce(state, 9, batch_with_keyless(4))
    assert keyed.error_code == ErrorCode.NONE and keyed.base_offset == 0
    if "compact" in policy:
        assert keyless.error_code == ErrorCode.INVALID_RECORD
        assert state.get_log("t", 0).log_end_offset == 4
    else:
        assert keyless.error_code == ErrorCode.NONE and keyless.base_offset == 4
