"""A scripted in-process Kafka broker for client tests: the real wire protocol (request headers
parsed with `onceflow.protocol.headers`, generated message classes), one thread per client.

It answers ApiVersions from `versions` (with KIP-511's fallback: a request above our highest
ApiVersions version gets UNSUPPORTED_VERSION and our ranges in a v0 body) and Metadata with
itself as the one broker and `topics` (name -> partition count); any other API goes to
`handlers[api_key](broker, version, request)`, which returns the response message, or None for
no response (acks=0). `seen` records (api key, version, header version, client id) of every
request. `port` 0 picks a free port (a test that restarts a broker passes the old one).
`behaviour` scripts a misbehaving broker:

- `wrong-correlation`: answers after the handshake carry the wrong correlation id;
- `close` / `silent`: after the handshake, a request closes the connection / is never answered;
- `close-at-once` / `silent-at-once`: the same from the first byte (the handshake fails).
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.headers import encode_response_header, parse_request_header
from onceflow.protocol.messages import REQUESTS, RESPONSES

Handler = Callable[["FakeBroker", int, Any], Any]


class FakeBroker(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        versions: Mapping[int, tuple[int, int]],
        topics: Mapping[str, int] | None = None,
        handlers: Mapping[int, Handler] | None = None,
        behaviour: str = "normal",
        cluster_id: str = "fake",
        port: int = 0,
    ) -> None:
        super().__init__(("127.0.0.1", port), _Connection)
        self.versions = dict(versions)  # what ApiVersions advertises
        self.topics = dict(topics or {})
        self.handlers = dict(handlers or {})
        self.behaviour = behaviour
        self.cluster_id = cluster_id
        self.seen: list[tuple[int, int, int, str | None]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def answer(self, key: int, version: int, request: Any) -> tuple[Any, int]:
        """The response message (None: no response) and the version to encode it at."""
        cls = RESPONSES[key]
        if key == ApiKey.API_VERSIONS:
            entries = [
                cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in self.versions.items()
            ]
            if version > self.versions[ApiKey.API_VERSIONS][1]:  # KIP-511
                return cls(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=entries), 0
            return cls(error_code=0, api_keys=entries), version
        if key == ApiKey.METADATA and key not in self.handlers:
            return self.metadata(), version
        handler = self.handlers.get(key)
        if handler is None:
            raise AssertionError(f"fake broker got api key {key}")
        return handler(self, version, request), version

    def metadata(self) -> Any:
        cls = RESPONSES[ApiKey.METADATA]
        partition = cls.MetadataResponseTopic.MetadataResponsePartition
        return cls(
            brokers=[cls.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
            cluster_id=self.cluster_id,
            controller_id=1,
            topics=[
                cls.MetadataResponseTopic(
                    name=name,
                    topic_id=uuid.UUID(int=7 + i),
                    partitions=[
                        partition(
                            partition_index=p,
                            leader_id=1,
                            leader_epoch=0,
                            replica_nodes=[1],
                            isr_nodes=[1],
                        )
                        for p in range(count)
                    ],
                )
                for i, (name, count) in enumerate(self.topics.items())
            ],
        )


class _Connection(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        broker: FakeBroker = self.server  # type: ignore[assignment]
        sock: socket.socket = self.request
        behaviour = broker.behaviour
        if behaviour == "close-at-once":
            return
        while True:
            size = sock.recv(4, socket.MSG_WAITALL)
            if len(size) < 4:
                return
            frame = sock.recv(struct.unpack(">i", size)[0], socket.MSG_WAITALL)
            header, body_offset = parse_request_header(frame)
            key, version = header.request_api_key, header.request_api_version
            with broker.lock:
                broker.seen.append((key, version, header.header_version, header.client_id))
            request = REQUESTS[key].decode(memoryview(frame)[body_offset:], version)
            handshake = key == ApiKey.API_VERSIONS
            if behaviour == "silent-at-once" or (behaviour == "silent" and not handshake):
                sock.recv(1)  # wait until the client gives up
                return
            if behaviour == "close" and not handshake:
                return
            correlation_id = header.correlation_id
            if behaviour == "wrong-correlation" and not handshake:
                correlation_id += 1
            response, encode_version = broker.answer(key, version, request)
            if response is None:
                continue
            flexible = not handshake and RESPONSES[key].is_flexible(version)
            out = encode_response_header(correlation_id, flexible) + response.encode(encode_version)
            sock.sendall(struct.pack(">i", len(out)) + out)
