"""`onceflow spark forget`: a retired query's marker groups and transactional ids, made by a
real streaming query's sink, are listed (dry run: nothing changes), then with --execute its
open transaction is aborted and its groups deleted; another query's are left alone."""

from __future__ import annotations

import uuid

from support.topics import create_topics, produce

from onceflow.cli.main import main
from onceflow.client.admin import AdminClient
from onceflow.client.producer import Producer
from onceflow.common import TopicPartition
from onceflow.spark.orders import end_offsets, read_committed


def _groups(bootstrap: str) -> set[str]:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        return {g.group_id for g in admin.list_groups()}


def _open_transaction(bootstrap: str, txn_id: str, topic: str, group: str | None) -> Producer:
    """A transaction left open on `topic` (with a marker-like offset for `group`)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.send(topic, b"left open", partition=0)
    if group is not None:
        producer.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, group, 30)
    producer.flush(30)
    return producer


def test_forget_a_retired_query(session, module_broker, tmp_path, capsys):
    bootstrap = module_broker.bootstrap
    create_topics(bootstrap, ["retired-in", "retired-out"], 2)
    produce(bootstrap, "retired-in", [b"%d" % i for i in range(20)], 2)
    before = _groups(bootstrap)
    checkpoint = str(tmp_path / "checkpoint")
    query = (
        session.readStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", "retired-in")
        .option("startingOffsets", "earliest")
        .load()
        .select("value")
        .writeStream.format("onceflow")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", "retired-out")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    prefix = f"onceflow-{query.id}"
    markers = _groups(bootstrap) - before  # the sink's marker groups, whatever their names
    assert markers
    crashed = _open_transaction(bootstrap, f"{prefix}-7", "retired-out", None)  # a dead task's
    other = f"onceflow-{uuid.uuid4()}-0"  # another query's task
    committed = _open_transaction(bootstrap, other, "retired-out", other)
    committed.commit_transaction(30)
    committed.close()
    lso, hw = (end_offsets(bootstrap, "retired-out", 2, rc) for rc in (True, False))
    assert lso != hw

    args = ["spark", "forget", "--bootstrap-server", bootstrap, "--checkpoint", checkpoint]
    assert main(args) == 0
    listed = capsys.readouterr().out
    for name in [*markers, f"{prefix}-7"]:
        assert name in listed, listed
    assert other not in listed and "dry run" in listed
    assert markers <= _groups(bootstrap)

    assert main([*args, "--execute"]) == 0
    done = f"aborted and fenced 3 transactional ids, deleted {len(markers)} marker groups"
    assert done in capsys.readouterr().out
    crashed.close(timeout=0)
    groups = _groups(bootstrap)
    assert not markers & groups and other in groups
    assert end_offsets(bootstrap, "retired-out", 2, True) == end_offsets(
        bootstrap, "retired-out", 2, False
    )
    values = sorted(bytes(r.value) for r in read_committed(bootstrap, "retired-out", 2))
    assert values == sorted([b"%d" % i for i in range(20)] + [b"left open"])
    assert main(["spark", "forget", "--bootstrap-server", bootstrap, "--prefix", prefix]) == 0
    assert "transactional id" in capsys.readouterr().out  # ids stay until they expire
