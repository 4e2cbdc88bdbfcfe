"""Two brokers on one data directory (issue 8, defect 1): the second must refuse to start with
one clear line naming the directory's lock and the holder's pid, while the first keeps serving;
after a kill -9 of the first the OS has dropped the lock and a new broker starts."""

from __future__ import annotations

import pytest
from support.broker import BrokerProcess, BrokerStartError

from onceflow.client.admin import AdminClient, NewTopic
from onceflow.client.producer import Producer
from onceflow.spark.orders import end_offsets


def _produce(bootstrap: str, n: int) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(n):
            producer.send("locked", b"%d" % i, partition=0).result(30)


def test_second_broker_on_the_same_directory_is_refused(tmp_path):
    data = tmp_path / "data"
    first = BrokerProcess(data)
    second = BrokerProcess(data, start=False)
    try:
        with AdminClient({"bootstrap.servers": first.bootstrap}) as admin:
            assert admin.create_topics([NewTopic("locked", 1, 1)])["locked"].ok
        _produce(first.bootstrap, 100)
        with pytest.raises(BrokerStartError):
            second.start()
        errors = [line for line in second.log_text().splitlines() if "ERROR" in line]
        assert len(errors) == 1, second.log_text()
        assert "Failed to acquire lock on file" in errors[0]
        assert f"held by pid {first.pid}" in errors[0] and str(data) in errors[0]
        _produce(first.bootstrap, 100)  # the first broker is untouched
        first.kill()  # kill -9: the OS drops the lock with the process
        second.start()
        assert end_offsets(second.bootstrap, "locked", 1, read_committed=False) == [200]
    finally:
        second.stop()
        first.stop()
