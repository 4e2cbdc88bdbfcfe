"""`onceflow groups list|describe|delete|reset-offsets` against a live broker (in-process)."""

from __future__ import annotations

import pytest
from client.client_support import FAST_GROUP_BROKER, group_consumer
from client.helpers import create_topic

from onceflow.cli.main import main
from onceflow.client.admin import AdminClient
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition

TIMEOUT = 30


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def setup(broker_factory):
    """A broker, topic `t` (2 partitions, 10 records each, 1 s apart in partition 0) and
    group `g` with committed offsets 4 and 0."""
    broker = broker_factory(FAST_GROUP_BROKER)
    b = broker.bootstrap
    create_topic(b, "t", 2)
    with Producer({"bootstrap.servers": b}) as producer:
        for i in range(10):
            producer.send("t", b"%d" % i, partition=0, timestamp=1_700_000_000_000 + i * 1000)
            producer.send("t", b"%d" % i, partition=1)
        producer.flush(TIMEOUT)
    commit(b, "g", {0: 4, 1: 0})
    return b


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(
            group, {TopicPartition("t", p): (o, "") for p, o in offsets.items()}
        )


def committed(bootstrap: str, group: str) -> dict[int, int]:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        got = admin.list_consumer_group_offsets(group, None)
    return {tp.partition: c[0] for tp, c in got.items() if c is not None}


def rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.startswith("g ")]


def test_list_and_describe_with_lag_up_to_the_last_stable_offset(setup, capsys):
    b = ("--bootstrap-server", setup)
    assert run(capsys, "groups", "list", *b)[1] == "g\n"
    assert run(capsys, "groups", "list", *b, "--state")[1].split() == [
        "GROUP",
        "STATE",
        "g",
        "Empty",
    ]
    producer = Producer({"bootstrap.servers": setup, "transactional.id": "lag"})
    try:
        producer.init_transactions(TIMEOUT)
        producer.begin_transaction()
        for _ in range(5):
            producer.send("t", b"open", partition=0)
        producer.flush(TIMEOUT)  # high watermark 15, last stable offset 10
        code, out, _ = run(capsys, "groups", "describe", *b, "--group", "g")
    finally:
        producer.abort_transaction(TIMEOUT)
        producer.close(5)
    assert code == 0
    assert "Consumer group 'g' (Empty, 0 members)" in out
    assert rows(out) == [
        ["g", "t", "0", "4", "10", "6", "-", "-", "-"],
        ["g", "t", "1", "0", "10", "10", "-", "-", "-"],
    ]


def test_describe_shows_active_members(setup, capsys):
    consumer = group_consumer(setup, "live")
    try:
        consumer.subscribe(["t"])
        for _ in range(50):
            if consumer.poll(0.2) or consumer.assignment():
                break
        code, out, _ = run(
            capsys, "groups", "describe", "--bootstrap-server", setup, "--group", "live"
        )
    finally:
        consumer.close()
    assert code == 0 and "(Stable, 1 members)" in out
    lines = [line.split() for line in out.splitlines() if line.startswith("live ")]
    assert [line[2] for line in lines] == ["0", "1"]
    assert all(line[6] != "-" for line in lines)  # the member's id


def test_reset_offsets_dry_run_then_execute(setup, capsys):
    b = ("--bootstrap-server", setup, "--group", "g")
    code, out, _ = run(capsys, "groups", "reset-offsets", *b, "--topic", "t", "--to-latest")
    assert code == 0 and "dry run" in out
    assert [r[-1] for r in rows(out)] == ["10", "10"]
    assert committed(setup, "g") == {0: 4, 1: 0}  # unchanged

    cases = [
        (("--to-earliest",), {0: 0, 1: 0}),
        (("--to-offset", "7"), {0: 7, 1: 7}),
        (("--to-offset", "99"), {0: 10, 1: 10}),  # kept within the log
        (("--shift-by", "-3"), {0: 7, 1: 7}),
        (("--shift-by", "-30"), {0: 0, 1: 0}),
    ]
    for target, expected in cases:
        code, _, err = run(
            capsys, "groups", "reset-offsets", *b, "--all-topics", *target, "--execute"
        )
        assert code == 0, err
        assert committed(setup, "g") == expected, target
    code, _, _ = run(
        capsys, "groups", "reset-offsets", *b, "--topic", "t:0", "--to-datetime",
        "2023-11-14T22:13:25Z", "--execute",
    )  # fmt: skip
    assert code == 0 and committed(setup, "g") == {0: 5, 1: 0}


def test_reset_offsets_refuses_an_active_group_and_bad_input(setup, capsys):
    b = ("--bootstrap-server", setup)
    consumer = group_consumer(setup, "busy")
    try:
        consumer.subscribe(["t"])
        for _ in range(50):
            if consumer.poll(0.2) or consumer.assignment():
                break
        code, _, err = run(
            capsys, "groups", "reset-offsets", *b, "--group", "busy", "--all-topics",
            "--to-earliest", "--execute",
        )  # fmt: skip
        assert code == 1 and "no active members; its state is Stable" in err
        code, _, err = run(capsys, "groups", "delete", *b, "--group", "busy")
        assert code == 1 and "has active members" in err
    finally:
        consumer.close()
    reset = ("groups", "reset-offsets", *b, "--group", "g")
    code, _, err = run(capsys, *reset, "--topic", "nope", "--to-earliest")
    assert code == 1 and "topic 'nope' does not exist" in err
    code, _, err = run(capsys, *reset, "--topic", "t:5", "--to-earliest")
    assert code == 1 and "has no partition 5" in err
    with pytest.raises(SystemExit) as exit_info:
        main([*reset, "--topic", "t", "--to-datetime", "last tuesday"])
    assert exit_info.value.code == 2
    assert "not an ISO-8601 date-time" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*reset, "--topic", "t"])  # no target
    assert exit_info.value.code == 2


def test_delete_and_unknown_groups(setup, capsys):
    b = ("--bootstrap-server", setup)
    code, out, _ = run(capsys, "groups", "delete", *b, "--group", "g")
    assert code == 0 and out == "Deleted consumer group 'g'.\n"
    assert committed(setup, "g") == {}
    code, _, err = run(capsys, "groups", "delete", *b, "--group", "g")
    assert code == 1 and "does not exist" in err
    code, _, err = run(capsys, "groups", "describe", *b, "--group", "nobody")
    assert code == 1 and "consumer group 'nobody' does not exist" in err
