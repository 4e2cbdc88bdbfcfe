"""`onceflow configs describe|alter` and `onceflow topics alter` against a live broker; the
topic config changes survive kill -9, and confluent-kafka's AdminClient sees them."""

from __future__ import annotations

import pytest
from client.helpers import create_topic
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from onceflow.cli.main import main

TIMEOUT = 30


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_alter_then_describe_and_survive_kill_9(broker, capsys):
    b = ("--bootstrap-server", broker.bootstrap)
    topic = ("--entity-type", "topics", "--entity-name", "t")
    create_topic(broker.bootstrap, "t", 1)
    code, out, err = run(
        capsys, "configs", "alter", *b, *topic,
        "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete],compression.type=zstd",
    )  # fmt: skip
    assert code == 0, err
    assert out == "Completed updating config for topic t.\n"
    code, out, _ = run(capsys, "configs", "describe", *b, *topic)
    assert out.splitlines() == [
        "Dynamic configs for topic t are:",
        "  cleanup.policy=compact,delete (DYNAMIC_TOPIC_CONFIG)",
        "  compression.type=zstd (DYNAMIC_TOPIC_CONFIG)",
        "  retention.ms=60000 (DYNAMIC_TOPIC_CONFIG)",
    ]
    assert (
        run(capsys, "configs", "alter", *b, *topic, "--delete-config", "compression.type")[0] == 0
    )

    broker.kill()  # kill -9 right after the answers
    broker.restart()
    code, out, _ = run(capsys, "configs", "describe", *b, *topic, "--all")
    assert "  retention.ms=60000 (DYNAMIC_TOPIC_CONFIG)" in out.splitlines()
    assert "  compression.type=producer (DEFAULT_CONFIG)" in out.splitlines()
    assert "  preallocate=false (DEFAULT_CONFIG)" in out.splitlines()


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (("--add-config", "retention.ms=abc"), 1, "INVALID_CONFIG: invalid value for retention.ms"),
        (("--add-config", "bogus.key=1"), 1, "Unknown topic config name: bogus.key"),
        (("--add-config", "retention.ms"), 2, "expected k1=v1"),
        ((), 2, "nothing to change"),
    ],
)
def test_bad_alters(broker, capsys, argv, code, message):
    create_topic(broker.bootstrap, "t", 1)
    argv_all = ["configs", "alter", "--bootstrap-server", broker.bootstrap,
                "--entity-type", "topics", "--entity-name", "t", *argv]  # fmt: skip
    if code == 2:
        with pytest.raises(SystemExit) as info:
            main(argv_all)
        assert info.value.code == 2
    else:
        assert main(argv_all) == 1
    assert message in capsys.readouterr().err
    assert run(capsys, "configs", "describe", "--bootstrap-server", broker.bootstrap,
               "--entity-type", "topics", "--entity-name", "t")[1].count("\n") == 1  # fmt: skip


def test_broker_configs_are_described_and_read_only(broker, capsys):
    b = ("--bootstrap-server", broker.bootstrap, "--entity-type", "brokers")
    code, out, _ = run(capsys, "configs", "describe", *b, "--entity-default")
    assert code == 0 and "  num.partitions=1 (DEFAULT_CONFIG)" in out.splitlines()
    code, _, err = run(capsys, "configs", "alter", *b, "--entity-name", "1",
                       "--add-config", "log.retention.ms=5")  # fmt: skip
    assert code == 1 and "Cannot update these configs dynamically: log.retention.ms" in err
    code, _, err = run(capsys, "configs", "describe", "--bootstrap-server", broker.bootstrap,
                       "--entity-type", "topics", "--entity-name", "missing")  # fmt: skip
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err


def test_topics_alter_adds_partitions(broker, capsys):
    b = ("--bootstrap-server", broker.bootstrap)
    create_topic(broker.bootstrap, "grow", 1)
    code, out, _ = run(capsys, "topics", "alter", *b, "--topic", "grow", "--partitions", "4")
    assert code == 0 and out == 'Topic "grow" now has 4 partitions.\n'
    code, _, err = run(capsys, "topics", "alter", *b, "--topic", "grow", "--partitions", "2")
    assert code == 1 and "INVALID_PARTITIONS" in err
    code, _, err = run(capsys, "topics", "alter", *b, "--topic", "nope", "--partitions", "2")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_alter_and_incremental_alter(broker):
    create_topic(broker.bootstrap, "c", 1)
    admin = ConfluentAdmin({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "c")
    ops = [
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ]
    resource.add_incremental_config(ops[0])
    resource.add_incremental_config(ops[1])
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "c")])
    entries = next(iter(described.values())).result(TIMEOUT)
    assert entries["retention.ms"].value == "5000"
    assert entries["cleanup.policy"].value == "delete,compact"
    replace = ConfigResource(ConfigResource.Type.TOPIC, "c", set_config={"segment.ms": "70000"})
    admin.alter_configs([replace])[replace].result(TIMEOUT)
    entries = next(
        iter(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "c")]).values())
    ).result(TIMEOUT)
    assert entries["segment.ms"].value == "70000"
    assert entries["retention.ms"].value == "604800000"  # replaced: back to the default
