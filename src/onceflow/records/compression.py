"""Record-batch compression codecs: none, gzip, snappy, lz4, zstd (attribute bits 0-2).

What Kafka writes, and so what we write:
- gzip: a gzip member (zlib, default level). Several concatenated members are accepted on read.
- snappy: Xerial's framing, as snappy-java's `SnappyOutputStream` in Kafka's producer writes it:
  the 16-byte header ``0x82 'SNAPPY' 0x00, int32 version 1, int32 compatible version 1``, then
  for each 32 KiB input block ``int32 length, raw snappy block``. On read we also accept a bare
  raw snappy block (what some librdkafka and kafka-python configurations send) and the
  official snappy framing format.
- lz4: the LZ4 frame format with independent 64 KiB blocks and no content checksum, like
  Kafka's `KafkaLZ4BlockOutputStream` (Kafka's reader rejects linked blocks).
- zstd: one plain zstd frame (level 3, Kafka's default).

Decompression failures raise CorruptRecordError (Kafka answers CORRUPT_MESSAGE).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from enum import IntEnum

import cramjam

from onceflow.common import BytesLike
from onceflow.records.errors import CorruptRecordError

__all__ = ["CompressionType", "compress", "decompress"]


class CompressionType(IntEnum):
    """Codec ids of attribute bits 0-2 (Kafka's `CompressionType`)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_INT32 = struct.Struct(">i")
ZSTD_LEVEL = 3


def _gzip_compress(data: BytesLike) -> bytes:
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: BytesLike) -> bytes:
    parts: list[bytes] = []
    remaining = bytes(data)
    while True:
        decompressor = zlib.decompressobj(31)
        parts.append(decompressor.decompress(remaining))
        if not decompressor.eof:
            raise CorruptRecordError("gzip stream truncated")
        remaining = decompressor.unused_data
        if not remaining:
            return b"".join(parts) if len(parts) > 1 else parts[0]


def _snappy_compress(data: BytesLike) -> bytes:
    view = memoryview(data)
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data: BytesLike) -> bytes:
    view = memoryview(data)
    if view[:8] == XERIAL_MAGIC:
        if len(view) < 16:
            raise CorruptRecordError("xerial snappy header truncated")
        parts: list[bytes] = []
        pos, end = 16, len(view)
        while pos < end:
            if end - pos < 4:
                raise CorruptRecordError("xerial snappy block length truncated")
            length: int = _INT32.unpack_from(view, pos)[0]
            pos += 4
            if length < 0 or pos + length > end:
                raise CorruptRecordError(f"xerial snappy block of {length} bytes truncated")
            parts.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
            pos += length
        return b"".join(parts)
    if view[:10] == _SNAPPY_FRAMED_MAGIC:
        return bytes(cramjam.snappy.decompress(view))
    return bytes(cramjam.snappy.decompress_raw(view))


def _lz4_compress(data: BytesLike) -> bytes:
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    compressor.compress(data if isinstance(data, bytes) else bytes(data))
    return bytes(compressor.finish())


def _zstd_compress(data: BytesLike) -> bytes:
    return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL))


# codec -> function; keyed by CompressionType, looked up by the batch header's int
_COMPRESS: dict[int, Callable[[BytesLike], bytes]] = {
    CompressionType.GZIP: _gzip_compress,
    CompressionType.SNAPPY: _snappy_compress,
    CompressionType.LZ4: _lz4_compress,
    CompressionType.ZSTD: _zstd_compress,
}

_DECOMPRESS: dict[int, Callable[[BytesLike], bytes]] = {
    CompressionType.GZIP: _gzip_decompress,
    CompressionType.SNAPPY: _snappy_decompress,
    CompressionType.LZ4: lambda data: bytes(cramjam.lz4.decompress(data)),
    CompressionType.ZSTD: lambda data: bytes(cramjam.zstd.decompress(data)),
}


def compress(codec: int, data: BytesLike) -> bytes:
    """Compress `data` (bytes-like) with `codec`; NONE returns the bytes unchanged."""
    if codec == CompressionType.NONE:
        return bytes(data)
    try:
        function = _COMPRESS[codec]
    except KeyError:
        raise ValueError(f"unknown compression codec {codec}") from None
    return function(data)


def decompress(codec: int, data: BytesLike) -> bytes:
    """Decompress `data` written with `codec`; raises CorruptRecordError when it cannot."""
    if codec == CompressionType.NONE:
        return bytes(data)
    function = _DECOMPRESS.get(codec)
    if function is None:
        raise CorruptRecordError(f"unknown compression codec {codec}")
    try:
        return function(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # cramjam raises its own DecompressionError, zlib raises zlib.error
        raise CorruptRecordError(
            f"{CompressionType(codec).name.lower()} decompression failed: {exc}"
        ) from None
