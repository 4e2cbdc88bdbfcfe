"""Producer id allocation, unique across restarts (Kafka's `ProducerIdManager`).

Ids are handed out from blocks of `PRODUCER_ID_BLOCK_SIZE` (Kafka's `ProducerIdsBlock`, 1000).
Before the first id of a block is returned, the start of the *next* block is written durably to
`<data dir>/producer-id-block` (temp file, fsync, rename, directory fsync). After a crash the
manager resumes at that persisted start, so ids of a partly used block are skipped, never
reused. Kafka keeps the block in ZooKeeper / the controller; onceflow, a single node, keeps it
in the data directory.

File format (text, one line): ``version 1 next_block_start <n> crc <crc32c of the line before
" crc">``. A missing file means a fresh broker (ids start at 0); an unreadable or corrupt file
raises `ProducerIdStateError`: handing out possibly reused ids would be worse than failing.
"""

from __future__ import annotations

import os

from crc32c import crc32c

from onceflow.log.fsutil import write_file_atomically

__all__ = ["PRODUCER_ID_BLOCK_FILE", "PRODUCER_ID_BLOCK_SIZE", "ProducerIdManager"]

PRODUCER_ID_BLOCK_FILE = "producer-id-block"
PRODUCER_ID_BLOCK_SIZE = 1000
FORMAT_VERSION = 1
MAX_PRODUCER_ID = 2**63 - 1


class ProducerIdStateError(Exception):
    """The persisted block cannot be read: refusing to allocate ids that may repeat."""


def _encode(next_block_start: int) -> bytes:
    body = f"version {FORMAT_VERSION} next_block_start {next_block_start}"
    return f"{body} crc {crc32c(body.encode())}\n".encode()


def _decode(data: bytes, path: str) -> int:
    text = data.decode("ascii", errors="replace").strip()
    body, sep, crc = text.rpartition(" crc ")
    parts = body.split()
    valid = (
        sep
        and crc.isdigit()
        and int(crc) == crc32c(body.encode())
        and len(parts) == 4
        and parts[0] == "version"
        and parts[1] == str(FORMAT_VERSION)
        and parts[2] == "next_block_start"
        and parts[3].isdigit()
    )
    if not valid:
        raise ProducerIdStateError(f"{path} is corrupt: {text[:80]!r}")
    return int(parts[3])


class ProducerIdManager:
    """Allocates producer ids; call from one thread (the broker's event loop)."""

    def __init__(self, data_dir: str, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self.path = os.path.join(data_dir, PRODUCER_ID_BLOCK_FILE)
        self.block_size = block_size
        os.makedirs(data_dir, exist_ok=True)
        try:
            with open(self.path, "rb") as f:
                self._persisted_next_block = _decode(f.read(), self.path)
        except FileNotFoundError:
            self._persisted_next_block = 0
        self.allocated = 0  # ids handed out since start (idempotent and transactional)
        # the current block is [_next_id, _block_end); empty until the first allocation
        self._next_id = self._persisted_next_block
        self._block_end = self._persisted_next_block

    @property
    def next_block_start(self) -> int:
        """First id of the block a restart would start from (what the file says)."""
        return self._persisted_next_block

    def generate_producer_id(self) -> int:
        """A producer id never handed out before, even across crashes.

        Raises OSError when the next block cannot be persisted (no id is handed out then), and
        ProducerIdStateError when the id space is exhausted.
        """
        if self._next_id >= self._block_end:
            self._reserve_block()
        producer_id = self._next_id
        self._next_id += 1
        self.allocated += 1
        return producer_id

    def _reserve_block(self) -> None:
        start = self._persisted_next_block
        end = start + self.block_size
        if end > MAX_PRODUCER_ID:
            raise ProducerIdStateError("producer id space exhausted")
        write_file_atomically(self.path, _encode(end))
        self._persisted_next_block = end
        self._next_id = start
        self._block_end = end
