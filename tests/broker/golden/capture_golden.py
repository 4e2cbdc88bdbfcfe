"""Capture real clients' Produce requests as golden bytes (run by hand; output is committed).

Usage: python tests/broker/golden/capture_golden.py

Starts a broker whose advertised address is a recording TCP relay, so every client request
passes through it; the first Produce frame of each client (3 records, values b"golden-0..2",
keys b"k0..k2", uncompressed) is written to `<client>_produce_v<N>.bin` beside this file,
size prefix included.
"""

from __future__ import annotations

import socket
import struct
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))

from support.broker import BrokerProcess  # noqa: E402

PRODUCE = 0


class RecordingRelay:
    """Relays client connections to the broker and keeps every client->broker frame."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.frames: list[bytes] = []
        self.target: tuple[str, int] | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            upstream = socket.create_connection(self.target)
            threading.Thread(
                target=self._client_to_broker, args=(client, upstream), daemon=True
            ).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _client_to_broker(self, client, upstream) -> None:
        buffer = b""
        while data := client.recv(65536):
            upstream.sendall(data)
            buffer += data
            while len(buffer) >= 4 and len(buffer) >= 4 + struct.unpack(">i", buffer[:4])[0]:
                size = struct.unpack(">i", buffer[:4])[0]
                self.frames.append(buffer[: 4 + size])
                buffer = buffer[4 + size :]
        upstream.close()

    @staticmethod
    def _pump(src, dst) -> None:
        while data := src.recv(65536):
            dst.sendall(data)
        dst.close()

    def take_produce(self) -> bytes:
        for frame in self.frames:
            if struct.unpack(">h", frame[4:6])[0] == PRODUCE:
                self.frames.clear()
                return frame
        raise RuntimeError("no Produce request captured")


def save(name: str, frame: bytes) -> None:
    version = struct.unpack(">h", frame[6:8])[0]
    path = HERE / f"{name}_produce_v{version}.bin"
    path.write_bytes(frame)
    print(f"wrote {path.name} ({len(frame)} bytes)")


def main() -> None:
    relay = RecordingRelay()
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(
            Path(tmp) / "data", {"num.partitions": 1}, f"127.0.0.1:{relay.port}", start=False
        )
        broker.start()
        relay.target = (broker.host, broker.port)
        bootstrap = f"127.0.0.1:{relay.port}"
        try:
            from confluent_kafka import Producer

            producer = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "acks": "all",
                    "linger.ms": 50,
                    "compression.type": "none",
                    "enable.idempotence": False,
                }
            )
            for i in range(3):
                producer.produce("golden", key=b"k%d" % i, value=b"golden-%d" % i, partition=0)
            producer.flush(10)
            save("librdkafka", relay.take_produce())

            from kafka import KafkaProducer

            producer = KafkaProducer(
                bootstrap_servers=bootstrap, acks="all", linger_ms=50, enable_idempotence=False
            )
            for i in range(3):
                producer.send("golden", key=b"k%d" % i, value=b"golden-%d" % i, partition=0)
            producer.flush(10)
            producer.close()
            save("kafka_python", relay.take_produce())
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
