"""`Broker` in-process: binding, the periodic retention task, stop with the logs closed."""

from __future__ import annotations

import asyncio

from broker.broker_helpers import call, make_batch, produce_request
from onceflow.broker.config import BrokerConfig
from onceflow.broker.server import Broker
from onceflow.protocol.api_keys import ApiKey


def produce(topic, records):
    return produce_request(topic, {0: records}, timeout_ms=1000)


def test_retention_task_deletes_old_segments(tmp_path):
    config = BrokerConfig(
        {
            "log.dirs": str(tmp_path / "data"),
            "listeners": "127.0.0.1:0",
            "log.segment.bytes": "1024",
            "log.retention.ms": "1",
            "log.retention.check.interval.ms": "100",
        }
    )

    async def scenario():
        broker = Broker(config)
        await broker.start()
        try:
            assert broker.bound.port != 0
            state = broker.state
            state.logs.create_topic("r", 1)
            for i in range(5):
                response = await call(
                    state,
                    ApiKey.PRODUCE,
                    9,
                    produce("r", make_batch([b"x" * 700], timestamp=1000 + i)),
                )
                assert response.responses[0].partition_responses[0].error_code == 0
            log = state.get_log("r", 0)
            # one 700-byte batch per 1 KiB segment; the retention task may already have run
            # between two produces, so only the end state is certain
            assert log.log_end_offset == 5
            for _ in range(200):  # up to 10 s on a loaded machine
                if log.log_start_offset == 4:
                    break
                await asyncio.sleep(0.05)
            return log.log_start_offset, len(log.segments)
        finally:
            await broker.stop()

    start, segments = asyncio.run(scenario())
    assert (start, segments) == (4, 1)
    assert (tmp_path / "data" / ".clean_shutdown").exists()
