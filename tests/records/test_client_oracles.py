"""Cross checks against the record code of kafka-python and aiokafka (C and pure Python).

Batches built by them must decode with ours (records, headers, attributes, CRC) and ours must
decode with theirs, for every codec. Uncompressed, our records section is byte-identical to
theirs. Their builders silently fall back to no compression when it does not help, so the
data here compresses well and each test checks the codec actually used.
"""

import os

import pytest
from aiokafka.record import default_records as aio_records
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch as KafkaBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaBuilder
from kafka.record.memory_records import MemoryRecords as KafkaMemoryRecords

from onceflow.log.validator import validate_batch
from onceflow.records.batch import (
    HEADER_SIZE,
    iter_batches,
    parse_header,
    patch_base_offset,
    patch_crc,
    patch_partition_leader_epoch,
    verify_crc,
)
from onceflow.records.builder import BatchBuilder
from onceflow.records.compression import CompressionType, decompress
from onceflow.records.control import ControlRecordType, build_control_batch
from onceflow.records.record import decode_records

CODECS = list(CompressionType)
KAFKA_PYTHON_HAS = {
    CompressionType.NONE: True,
    CompressionType.GZIP: kafka_codec.has_gzip(),
    CompressionType.SNAPPY: kafka_codec.has_snappy(),
    CompressionType.LZ4: kafka_codec.has_lz4(),
    CompressionType.ZSTD: kafka_codec.has_zstd(),
}
AIO_BATCHES = [aio_records.DefaultRecordBatch, aio_records._DefaultRecordBatchPy]
AIO_BUILDERS = [aio_records.DefaultRecordBatchBuilder, aio_records._DefaultRecordBatchBuilderPy]
PRODUCERS = [(-1, -1, -1, False), (1001, 2, 40, False), (77, 5, 2**31 - 3, True)]


def entries(count=40):
    """(timestamp, key, value, headers) with nulls, empty values and several headers."""
    pad = os.urandom(16) * 8
    out = []
    for i in range(count):
        key = None if i % 7 == 3 else b"key-%d" % i
        value = None if i % 11 == 5 else (b"" if i % 13 == 6 else pad * (i % 4 + 1))
        headers = [("trace", b"t-%d" % i), ("empty", b""), ("nothing", None)][: i % 4]
        out.append((1_700_000_000_000 + i * 3 - (i % 5), key, value, headers))
    return out


def build_ours(codec, producer, data):
    producer_id, producer_epoch, base_sequence, transactional = producer
    builder = BatchBuilder(codec, producer_id, producer_epoch, base_sequence, transactional)
    for entry in data:
        builder.append(*entry)
    return builder.build()


def build_theirs(builder_class, codec, producer, data):
    producer_id, producer_epoch, base_sequence, transactional = producer
    builder = builder_class(
        2, codec, transactional, producer_id, producer_epoch, base_sequence, 1 << 22
    )
    for offset, (timestamp, key, value, headers) in enumerate(data):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def check_their_batch_with_ours(batch, codec, producer, data):
    header = parse_header(batch)
    assert header.compression == codec, "their builder fell back to another codec"
    assert (
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.is_transactional,
    ) == producer
    assert header.records_count == len(data) and header.total_size == len(batch)
    assert header.base_timestamp == data[0][0]
    assert header.max_timestamp == max(e[0] for e in data)
    assert verify_crc(batch, header)
    assert validate_batch(header, batch, check_records=True) is None
    records = decode_records(batch)
    got = [(header.base_timestamp + r.timestamp_delta, r.key, r.value, r.headers) for r in records]
    assert got == data


def check_our_batch_with_theirs(batch_class, batch, codec, producer, data):
    theirs = batch_class(bytes(batch))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert theirs.is_transactional == producer[3] and not theirs.is_control_batch
    assert theirs.producer_id == producer[0] and theirs.producer_epoch == producer[1]
    assert theirs.base_sequence == producer[2]
    got = [(r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert [r.offset for r in batch_class(bytes(batch))] == list(range(len(data)))
    assert got == data


@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_with_ours(codec, producer):
    if not KAFKA_PYTHON_HAS[codec]:
        pytest.skip(f"kafka-python lacks the {codec.name} library")
    data = entries()
    check_their_batch_with_ours(
        build_theirs(KafkaBuilder, codec, producer, data), codec, producer, data
    )


@pytest.mark.parametrize("builder_class", AIO_BUILDERS, ids=["aiokafka-c", "aiokafka-py"])
@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_batches_decode_with_ours(codec, producer, builder_class):
    data = entries()
    check_their_batch_with_ours(
        build_theirs(builder_class, codec, producer, data), codec, producer, data
    )


@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_kafka_python(codec, producer):
    if not KAFKA_PYTHON_HAS[codec]:
        pytest.skip(f"kafka-python lacks the {codec.name} library")
    data = entries()
    check_our_batch_with_theirs(
        KafkaBatch, build_ours(codec, producer, data), codec, producer, data
    )


@pytest.mark.parametrize("batch_class", AIO_BATCHES, ids=["aiokafka-c", "aiokafka-py"])
@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_aiokafka(codec, producer, batch_class):
    data = entries()
    check_our_batch_with_theirs(
        batch_class, build_ours(codec, producer, data), codec, producer, data
    )


@pytest.mark.parametrize("builder_class", [KafkaBuilder, *AIO_BUILDERS])
@pytest.mark.parametrize("producer", PRODUCERS)
def test_uncompressed_records_section_is_byte_identical(builder_class, producer):
    data = entries()
    theirs = bytearray(build_theirs(builder_class, CompressionType.NONE, producer, data))
    ours = build_ours(CompressionType.NONE, producer, data)
    # they write partitionLeaderEpoch 0, Kafka's producer (and we) write -1: outside the CRC
    assert parse_header(ours).partition_leader_epoch == -1
    patch_partition_leader_epoch(ours, parse_header(theirs).partition_leader_epoch)
    assert bytes(ours) == bytes(theirs)


@pytest.mark.parametrize("codec", [c for c in CODECS if c != CompressionType.NONE])
def test_compressed_records_sections_decompress_to_the_same_bytes(codec):
    data = entries()
    theirs = build_theirs(aio_records.DefaultRecordBatchBuilder, codec, PRODUCERS[1], data)
    ours = build_ours(codec, PRODUCERS[1], data)
    assert decompress(codec, memoryview(ours)[HEADER_SIZE:]) == decompress(
        codec, memoryview(theirs)[HEADER_SIZE:]
    )


def test_plain_snappy_batch_from_a_non_xerial_writer():
    data = entries()
    plain = bytearray(build_theirs(KafkaBuilder, CompressionType.NONE, PRODUCERS[0], data))
    body = (
        kafka_codec.snappy_encode(bytes(plain[HEADER_SIZE:]), xerial_compatible=False)
        if kafka_codec.has_snappy()
        else None
    )
    if body is None:
        pytest.skip("kafka-python lacks python-snappy")
    batch = plain[:HEADER_SIZE] + body
    batch[21:23] = int(CompressionType.SNAPPY).to_bytes(2, "big")
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
    patch_crc(batch)
    check_their_batch_with_ours(bytes(batch), CompressionType.SNAPPY, PRODUCERS[0], data)
    # and kafka-python agrees it is a valid snappy batch
    assert [r.value for r in KafkaBatch(bytes(batch))] == [e[2] for e in data]


@pytest.mark.parametrize("control_type", list(ControlRecordType))
def test_control_batches_read_by_the_clients(control_type):
    batch = bytes(build_control_batch(9, 4, control_type, 12, 1_700_000_000_000))
    kafka_batch = KafkaBatch(batch)
    assert kafka_batch.validate_crc() and kafka_batch.is_control_batch
    (record,) = list(kafka_batch)
    assert record.commit == (control_type == ControlRecordType.COMMIT)
    assert record.abort == (control_type == ControlRecordType.ABORT)
    for batch_class in AIO_BATCHES:
        aio_batch = batch_class(batch)
        assert aio_batch.validate_crc() and aio_batch.is_control_batch
        assert aio_batch.is_transactional and aio_batch.producer_id == 9


def test_record_sets_split_identically_by_memory_records():
    batches = [
        build_ours(codec, producer, entries(5)) for codec in CODECS for producer in PRODUCERS
    ]
    for offset, batch in enumerate(batches):
        patch_base_offset(batch, offset * 5)
    record_set = b"".join(batches)
    ours = [(h.base_offset, bytes(view)) for h, view in iter_batches(record_set)]
    for memory_records_class in (KafkaMemoryRecords, AioMemoryRecords):
        theirs_iter = memory_records_class(record_set)
        theirs = []
        while theirs_iter.has_next():
            batch = theirs_iter.next_batch()
            theirs.append(batch.base_offset)
        assert theirs == [offset for offset, _ in ours]
    # a fetch response may end in a partial batch: the clients skip it and so does split
    truncated = record_set + batches[0][:30]
    kafka_records = KafkaMemoryRecords(truncated)
    count = 0
    while kafka_records.has_next():
        kafka_records.next_batch()
        count += 1
    from onceflow.records.batch import split_complete_batches

    complete, trailing = split_complete_batches(truncated)
    assert len(complete) == count == len(batches) and trailing == 30
