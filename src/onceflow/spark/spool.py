"""A write task's rows, read in full before its transaction opens.

A transaction's clock (`transaction.timeout.ms`) starts at its first record. Sending while the
rows are still being computed would make the transaction last as long as the task's whole
upstream work (reading the source, the query's transforms): a skewed task would outlive the
timeout on every attempt. `Spool` reads the task's Arrow record batches first, in memory up
to `memory_bytes`, then into an Arrow IPC file in the temporary directory, so the transaction
spans only the sending.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

__all__ = ["Spool"]

MEMORY_BYTES = 64 * 1024 * 1024


class Spool:
    """The non-empty record batches of `batches`, kept for one pass; use as a context
    manager (the file, if any, is removed on exit)."""

    def __init__(self, batches: Iterable[Any], memory_bytes: int = MEMORY_BYTES) -> None:
        self.kept: list[Any] = []
        self.path: str | None = None
        self.rows = 0
        writer = None
        size = 0
        try:
            for batch in batches:
                if not batch.num_rows:
                    continue
                self.rows += batch.num_rows
                if writer is None and size + batch.nbytes <= memory_bytes:
                    self.kept.append(batch)
                    size += batch.nbytes
                    continue
                if writer is None:
                    writer = self._open_file(batch.schema)
                writer.write_batch(batch)
        except BaseException:
            self.close()
            raise
        finally:
            if writer is not None:
                writer.close()
                self._sink.close()

    def _open_file(self, schema: Any) -> Any:
        fd, self.path = tempfile.mkstemp(prefix="onceflow-spool-", suffix=".arrows")
        os.close(fd)
        self._sink = pa.OSFile(self.path, "wb")
        return pa.ipc.new_stream(self._sink, schema)

    def __iter__(self) -> Iterator[Any]:
        yield from self.kept
        if self.path is not None:
            with pa.memory_map(self.path) as source:
                yield from pa.ipc.open_stream(source)

    def close(self) -> None:
        if self.path is not None:
            os.unlink(self.path)
            self.path = None

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
