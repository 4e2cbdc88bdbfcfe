"""`broker.metrics`: the Prometheus text served on `onceflow.metrics.listener`, in-process."""

from __future__ import annotations

import asyncio
import re

from broker.broker_helpers import (
    api_versions_over_tcp,
    call,
    http,
    make_batch,
    produce_request,
    samples,
)
from onceflow.broker.config import BrokerConfig
from onceflow.broker.metrics import BrokerMetrics
from onceflow.broker.server import Broker
from onceflow.prometheus import escape
from onceflow.protocol.api_keys import ApiKey
from onceflow.records.builder import BatchBuilder


def produce(topic, partition, records):
    return produce_request(topic, {partition: records}, timeout_ms=1000)


def test_metrics_listener_serves_partition_and_request_figures(tmp_path):
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "127.0.0.1:0",
            "onceflow.metrics.listener": "127.0.0.1:0",
        }
    )

    async def scenario():
        broker = Broker(config)
        await broker.start()
        try:
            state = broker.state
            state.logs.create_topic("m.e-t_r1cs", 2)
            plain = make_batch([b"a", b"b"])
            txn = make_batch(
                [b"t"], producer_id=4, producer_epoch=0, base_sequence=0, is_transactional=True
            )
            idem = make_batch([b"i"], producer_id=5, producer_epoch=0, base_sequence=0)
            for records in (plain, txn, idem, bytearray(idem)):  # the last one is a retry
                response = await call(state, ApiKey.PRODUCE, 9, produce("m.e-t_r1cs", 0, records))
                assert response.responses[0].partition_responses[0].error_code == 0
            await api_versions_over_tcp(broker.bound)
            await api_versions_over_tcp(broker.bound)
            address = broker.metrics_server.bound
            ok = await http(address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            missing = await http(address, b"GET /other HTTP/1.1\r\n\r\n")
            post = await http(address, b"POST /metrics HTTP/1.1\r\n\r\n")
            return ok, missing, post
        finally:
            await broker.stop()

    (head, body), missing, post = asyncio.run(scenario())
    assert head.startswith("HTTP/1.1 200 OK")
    assert "text/plain; version=0.0.4" in head
    got = samples(body)
    p0 = '{topic="m.e-t_r1cs",partition="0"}'
    p1 = '{topic="m.e-t_r1cs",partition="1"}'
    assert got["onceflow_partition_live_producer_ids" + p0] == "2"
    assert got["onceflow_partition_live_producer_ids" + p1] == "0"
    assert got["onceflow_partition_log_end_offset" + p0] == "4"
    assert got["onceflow_partition_high_watermark" + p0] == "4"
    assert got["onceflow_partition_last_stable_offset" + p0] == "2"  # the open transaction
    assert got["onceflow_partition_log_start_offset" + p0] == "0"
    assert got['onceflow_requests_total{api="API_VERSIONS"}'] == "2"
    assert got["onceflow_produce_duplicate_batches_total"] == "1"
    assert "# TYPE onceflow_partition_last_stable_offset gauge" in body
    assert "# TYPE onceflow_requests_total counter" in body
    assert missing[0].startswith("HTTP/1.1 404")
    assert post[0].startswith("HTTP/1.1 405")


def test_no_metrics_listener_by_default(tmp_path):
    config = BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "127.0.0.1:0"})

    async def scenario():
        broker = Broker(config)
        await broker.start()
        try:
            return broker.metrics_server
        finally:
            await broker.stop()

    assert asyncio.run(scenario()) is None


def test_render_counts_errors_and_requests_without_a_broker():
    metrics = BrokerMetrics()
    metrics.count_request(0)
    metrics.count_request(0)
    metrics.count_request(500)  # an api key beyond the table still counts
    metrics.produce_errors[45] += 3  # OUT_OF_ORDER_SEQUENCE_NUMBER
    got = samples(metrics.render(None))
    assert got['onceflow_requests_total{api="PRODUCE"}'] == "2"
    assert got['onceflow_requests_total{api="UNKNOWN_500"}'] == "1"
    assert got['onceflow_produce_errors_total{error="OUT_OF_ORDER_SEQUENCE_NUMBER"}'] == "3"
    assert metrics.requests(0) == 2


def test_label_values_are_escaped():
    assert escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'


def test_allocated_producer_ids_count_transactional_producers_too(state):
    from onceflow.protocol.messages.init_producer_id import InitProducerIdRequest

    for transactional_id in (None, "txn-a", "txn-b"):
        request = InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout_ms=60_000,
            producer_id=-1,
            producer_epoch=-1,
        )
        response = asyncio.run(call(state, ApiKey.INIT_PRODUCER_ID, 4, request))
        assert response.error_code == 0
    got = samples(state.metrics.render(state))
    assert got["onceflow_producer_ids_allocated_total"] == "3"


def test_exposition_follows_prometheus_conventions(state):
    """Every sample belongs to a family announced by # HELP and # TYPE (a histogram's
    samples end in _bucket, _sum or _count); counters end in _total, gauges do not; names and
    labels are snake_case under onceflow_."""
    state.logs.create_topic("t", 2, {})
    text = state.metrics.render(state)
    families: dict[str, str] = {}
    helped: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name not in families, f"family {name} announced twice"
            families[name] = kind
        elif line:
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            family = re.sub(r"_(bucket|sum|count)$", "", name)
            if families.get(family) == "histogram":
                name = family
            assert name in families and name in helped, f"sample of an unannounced family: {line}"
            assert re.fullmatch(r"onceflow_[a-z0-9_]+", name), name
            labels = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', line)
            assert all(re.fullmatch(r"[a-z_]+", label) for label in labels), line
    for name, kind in families.items():
        assert kind in ("counter", "gauge", "histogram"), (name, kind)
        assert name.endswith("_total") == (kind == "counter"), (name, kind)


def test_metrics_show_the_log_cleaner(tmp_path):
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "127.0.0.1:0",
            "onceflow.metrics.listener": "127.0.0.1:0",
            "log.cleaner.enable": "false",  # the round below is run by hand
        }
    )

    async def scenario():
        broker = Broker(config)
        await broker.start()
        try:
            logs = broker.state.logs
            logs.create_topic("table", 1, {"cleanup.policy": "compact", "segment.bytes": "600"})
            log = logs.get_log("table", 0)
            for i in range(40):
                builder = BatchBuilder()
                builder.append(1_000 + i, b"key-%d" % (i % 4), b"value-%d" % i)
                log.append(builder.build())
            log.flush()
            address = broker.metrics_server.bound
            _, before = await http(address, b"GET /metrics HTTP/1.1\r\n\r\n")
            stats = logs.cleaner.clean_log(log)
            _, after = await http(address, b"GET /metrics HTTP/1.1\r\n\r\n")
            return samples(before), samples(after), stats
        finally:
            await broker.stop()

    before, after, stats = asyncio.run(scenario())
    p0 = '{topic="table",partition="0"}'
    assert before["onceflow_log_cleaner_records_removed_total"] == "0"
    assert float(before["onceflow_partition_dirty_ratio" + p0]) == 1.0
    assert before["onceflow_partition_last_cleaned_timestamp_ms" + p0] == "-1"
    assert stats.records_removed > 0
    assert after["onceflow_log_cleaner_records_removed_total"] == str(stats.records_removed)
    assert after["onceflow_log_cleaner_bytes_read_total"] == str(stats.bytes_read)
    assert float(after["onceflow_partition_dirty_ratio" + p0]) == 0.0
    assert int(after["onceflow_partition_last_cleaned_timestamp_ms" + p0]) > 0
    assert float(after["onceflow_log_cleaner_seconds_since_last_run"]) >= 0
