"""The scripted in-process broker (`tests/support/fake_broker.py`) with a producer's side of
Kafka, for the idempotent producer's error paths.

It keeps idempotent producer state per partition the way Kafka's broker does for
these tests' purposes: the next expected sequence per (producer id, epoch), duplicates of
retained batches answered with their original offset, a gap answered
OUT_OF_ORDER_SEQUENCE_NUMBER, a new epoch starting at sequence 0, an unknown producer with a
non-zero sequence answered UNKNOWN_PRODUCER_ID. Tests script faults per partition:
`inject[(topic, partition)]` is a list of actions consumed one per produced batch —
an error code (batch not appended) or "lose-response" (batch appended, answer replaced by
NETWORK_EXCEPTION, as if the response was lost).
"""

from __future__ import annotations

from collections import defaultdict

from support.fake_broker import FakeBroker

from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages import RESPONSES
from onceflow.records.batch import iter_batches
from onceflow.records.record import decode_records

VERSIONS = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (0, 12),
    ApiKey.PRODUCE: (3, 9),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
}


class ProducerFakeBroker(FakeBroker):
    """Answers InitProducerId and Produce with Kafka's idempotent-producer rules (see above)."""

    def __init__(self, topics: dict[str, int], versions: dict[int, tuple[int, int]] = VERSIONS):
        self.log: dict[tuple[str, int], list[bytes]] = defaultdict(list)  # values, in order
        self.batches: dict[tuple[str, int], list[tuple[int, int, int, int, int]]] = defaultdict(
            list
        )
        self.next_seq: dict[tuple[tuple[str, int], int, int], int] = {}
        self.inject: dict[tuple[str, int], list] = defaultdict(list)
        self.attempts: dict[tuple[str, int], int] = defaultdict(int)  # produced batches seen
        self.init_requests: list[tuple[int, int, int]] = []  # (version, producer id, epoch)
        self.producers: dict[int, int] = {}  # producer id -> epoch
        self._next_pid = 1000
        handlers = {ApiKey.INIT_PRODUCER_ID: _init_producer_id, ApiKey.PRODUCE: _produce}
        super().__init__(versions, topics, handlers)

    # ------------------------------------------------------------------ domain

    def init_producer_id(self, version: int, request) -> tuple[int, int]:
        with self.lock:
            self.init_requests.append((version, request.producer_id, request.producer_epoch))
            if (
                request.producer_id in self.producers
                and request.producer_epoch == self.producers[request.producer_id]
            ):
                self.producers[request.producer_id] += 1
                return request.producer_id, self.producers[request.producer_id]
            self._next_pid += 1
            self.producers[self._next_pid] = 0
            return self._next_pid, 0

    def append(self, tp: tuple[str, int], batch: memoryview) -> tuple[int, int]:
        """Returns (error code, base offset)."""
        with self.lock:
            self.attempts[tp] += 1
            action = self.inject[tp].pop(0) if self.inject[tp] else None
            if isinstance(action, int):
                return action, -1
            ((header, view),) = list(iter_batches(batch))
            pid, epoch, seq, count = (
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.records_count,
            )
            for stored in self.batches[tp]:
                if stored[:3] == (pid, epoch, seq):
                    return ErrorCode.NONE, stored[4]  # duplicate: original offset
            expected = self.next_seq.get((tp, pid, epoch))
            if expected is None:
                if seq != 0:
                    return ErrorCode.UNKNOWN_PRODUCER_ID, -1
            elif seq != expected:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
            base_offset = len(self.log[tp])
            self.log[tp].extend(r.value for r in decode_records(view))
            self.batches[tp].append((pid, epoch, seq, count, base_offset))
            self.next_seq[(tp, pid, epoch)] = seq + count
            if action == "lose-response":
                return ErrorCode.NETWORK_EXCEPTION, -1
            return ErrorCode.NONE, base_offset


def _init_producer_id(broker: ProducerFakeBroker, version: int, request):
    producer_id, epoch = broker.init_producer_id(version, request)
    return RESPONSES[ApiKey.INIT_PRODUCER_ID](
        error_code=0, producer_id=producer_id, producer_epoch=epoch
    )


def _produce(broker: ProducerFakeBroker, version: int, request):
    cls = RESPONSES[ApiKey.PRODUCE]
    topic_cls = cls.TopicProduceResponse
    part_cls = topic_cls.PartitionProduceResponse
    topics = []
    for topic in request.topic_data:
        parts = []
        for p in topic.partition_data:
            code, offset = broker.append((topic.name, p.index), p.records)
            parts.append(part_cls(index=p.index, error_code=code, base_offset=offset))
        topics.append(topic_cls(name=topic.name, partition_responses=parts))
    return cls(responses=topics)
