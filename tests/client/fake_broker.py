"""A scripted in-process Kafka broker for the idempotent producer's error paths.

It speaks the real wire protocol (headers from `onceflow.protocol.headers`, generated message
classes) and keeps idempotent producer state per partition the way Kafka's broker does for
these tests' purposes: the next expected sequence per (producer id, epoch), duplicates of
retained batches answered with their original offset, a gap answered
OUT_OF_ORDER_SEQUENCE_NUMBER, a new epoch starting at sequence 0, an unknown producer with a
non-zero sequence answered UNKNOWN_PRODUCER_ID. Tests script faults per partition:
`inject[(topic, partition)]` is a list of actions consumed one per produced batch —
an error code (batch not appended) or "lose-response" (batch appended, answer replaced by
NETWORK_EXCEPTION, as if the response was lost).
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections import defaultdict

from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import encode_response_header, parse_request_header
from onceflow.protocol.messages import REQUESTS, RESPONSES
from onceflow.records.batch import iter_batches
from onceflow.records.record import decode_records

VERSIONS = {
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.METADATA: (0, 12),
    ApiKey.PRODUCE: (3, 9),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
}


class FakeBroker(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, topics: dict[str, int], versions: dict[int, tuple[int, int]] = VERSIONS):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.topics = topics
        self.versions = versions  # what ApiVersions advertises
        self.lock = threading.Lock()
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
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

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


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: FakeBroker = self.server  # type: ignore[assignment]
        sock: socket.socket = self.request
        while True:
            size = sock.recv(4, socket.MSG_WAITALL)
            if len(size) < 4:
                return
            frame = sock.recv(struct.unpack(">i", size)[0], socket.MSG_WAITALL)
            header, body_offset = parse_request_header(frame)
            key, version = header.request_api_key, header.request_api_version
            request = REQUESTS[key].decode(memoryview(frame)[body_offset:], version)
            response = self._answer(server, key, version, request)
            flexible = key != ApiKey.API_VERSIONS and RESPONSES[key].is_flexible(version)
            out = encode_response_header(header.correlation_id, flexible) + response.encode(version)
            sock.sendall(struct.pack(">i", len(out)) + out)

    def _answer(self, server: FakeBroker, key: int, version: int, request):
        cls = RESPONSES[key]
        if key == ApiKey.API_VERSIONS:
            return cls(
                error_code=0,
                api_keys=[
                    cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                    for k, (lo, hi) in server.versions.items()
                ],
            )
        if key == ApiKey.METADATA:
            host, port = server.server_address
            partition = cls.MetadataResponseTopic.MetadataResponsePartition
            return cls(
                brokers=[cls.MetadataResponseBroker(node_id=1, host=host, port=port)],
                cluster_id="fake",
                controller_id=1,
                topics=[
                    cls.MetadataResponseTopic(
                        name=name,
                        partitions=[
                            partition(
                                partition_index=p, leader_id=1, replica_nodes=[1], isr_nodes=[1]
                            )
                            for p in range(n)
                        ],
                    )
                    for name, n in server.topics.items()
                ],
            )
        if key == ApiKey.INIT_PRODUCER_ID:
            producer_id, epoch = server.init_producer_id(version, request)
            return cls(error_code=0, producer_id=producer_id, producer_epoch=epoch)
        if key == ApiKey.PRODUCE:
            topic_cls = cls.TopicProduceResponse
            part_cls = topic_cls.PartitionProduceResponse
            topics = []
            for topic in request.topic_data:
                parts = []
                for p in topic.partition_data:
                    code, offset = server.append((topic.name, p.index), p.records)
                    parts.append(part_cls(index=p.index, error_code=code, base_offset=offset))
                topics.append(topic_cls(name=topic.name, partition_responses=parts))
            return cls(responses=topics)
        raise AssertionError(f"fake broker got api key {key}")
