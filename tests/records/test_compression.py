"""Codecs: round trips for every codec, and the framings other Kafka clients write and read."""

import gzip
import os
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onceflow.records.compression import XERIAL_MAGIC, CompressionType, compress, decompress
from onceflow.records.errors import CorruptRecordError

ALL_CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c != CompressionType.NONE]


def sample(size: int) -> bytes:
    """Compressible but not trivial data."""
    chunk = os.urandom(64)
    return (chunk * (size // 64 + 1))[:size]


@settings(deadline=None, max_examples=60)
@given(codec=st.sampled_from(ALL_CODECS), data=st.binary(max_size=5000))
def test_round_trip(codec, data):
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("size", [0, 1, 32 * 1024, 32 * 1024 + 1, 200_000])
def test_round_trip_block_boundaries(codec, size):
    data = sample(size)
    for form in (data, bytearray(data), memoryview(data)):
        assert decompress(codec, compress(codec, form)) == data


def test_snappy_writes_xerial_framing():
    data = sample(100_000)
    framed = compress(CompressionType.SNAPPY, data)
    assert framed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    # 32 KiB input blocks, each a length-prefixed raw snappy block
    pos, blocks = 16, []
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(blocks) == data


def test_snappy_reads_plain_raw_and_framed_formats():
    data = sample(70_000)
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress(data))) == data


def test_snappy_interop_with_kafka_python_codec():
    pytest.importorskip("snappy")
    from kafka import codec as kafka_codec

    data = sample(80_000)
    assert kafka_codec.snappy_decode(compress(CompressionType.SNAPPY, data)) == data
    for xerial in (True, False):
        encoded = kafka_codec.snappy_encode(data, xerial_compatible=xerial)
        assert decompress(CompressionType.SNAPPY, encoded) == data


def test_snappy_interop_with_aiokafka_codec():
    from aiokafka import codec as aio_codec

    data = sample(80_000)
    assert aio_codec.snappy_decode(compress(CompressionType.SNAPPY, data)) == data
    for xerial in (True, False):
        encoded = aio_codec.snappy_encode(data, xerial_compatible=xerial)
        assert decompress(CompressionType.SNAPPY, encoded) == data


def test_lz4_frame_has_independent_blocks_like_kafka():
    frame = compress(CompressionType.LZ4, sample(200_000))
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flags, block_descriptor = frame[4], frame[5]
    assert flags >> 6 == 1  # version 01
    assert flags & 0x20  # block independence: Kafka's reader does not support linked blocks
    assert not flags & 0x04  # no content checksum, as Kafka writes
    assert block_descriptor == 0x40  # 64 KiB maximum block size


def test_lz4_interop_with_python_lz4():
    lz4_frame = pytest.importorskip("lz4.frame")
    data = sample(150_000)
    assert lz4_frame.decompress(compress(CompressionType.LZ4, data)) == data
    for linked in (True, False):
        encoded = lz4_frame.compress(data, block_linked=linked, content_checksum=True)
        assert decompress(CompressionType.LZ4, encoded) == data


def test_zstd_interop_with_zstandard():
    zstandard = pytest.importorskip("zstandard")
    data = sample(150_000)
    assert (
        zstandard.ZstdDecompressor().decompress(
            compress(CompressionType.ZSTD, data), max_output_size=len(data)
        )
        == data
    )
    # a streamed frame carries no content size
    streamed = zstandard.ZstdCompressor().compressobj()
    encoded = streamed.compress(data) + streamed.flush()
    assert decompress(CompressionType.ZSTD, encoded) == data


def test_gzip_interop_and_multiple_members():
    data = sample(50_000)
    assert gzip.decompress(compress(CompressionType.GZIP, data)) == data
    two_members = gzip.compress(data[:100]) + gzip.compress(data[100:])
    assert decompress(CompressionType.GZIP, two_members) == data


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_and_truncation_raise_corrupt(codec):
    encoded = compress(codec, sample(100_000))
    with pytest.raises(CorruptRecordError):
        decompress(codec, encoded[: len(encoded) // 2])
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x00\x01garbage" * 7)


def test_xerial_bad_block_length():
    framed = bytearray(compress(CompressionType.SNAPPY, sample(1000)))
    struct.pack_into(">i", framed, 16, 10**6)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, framed)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, framed[:12])


def test_unknown_codec():
    with pytest.raises(CorruptRecordError):
        decompress(5, b"x")
    with pytest.raises(ValueError):
        compress(6, b"x")
