"""`onceflow acls add|list|remove` against a broker process running Kafka's StandardAuthorizer
(`super.users=User:ANONYMOUS`, so the PLAINTEXT listener administers) with a SASL_PLAINTEXT
listener where `User:alice` logs in with SCRAM: ACLs the CLI adds and removes decide whether
alice's confluent-kafka producer may write; list filters by resource, pattern and principal."""

from __future__ import annotations

import pytest
from client.helpers import create_topic
from confluent_kafka import KafkaError, Producer
from support.sasl_broker import scram_config, start_sasl_broker

from onceflow.cli.main import main

pytestmark = pytest.mark.timeout(120)
ALICE, PASSWORD = "alice", "alice-pw"
AUTHZ = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
    "onceflow.sasl.bootstrap.users": f"SCRAM-SHA-512=[name={ALICE},password={PASSWORD}]",
}


@pytest.fixture(scope="module")
def authz_broker(tmp_path_factory):
    broker = start_sasl_broker(tmp_path_factory.mktemp("cli-acls") / "data", **AUTHZ)
    yield broker
    broker.stop()


def acls(capsys, broker, *argv: str) -> tuple[int, str, str]:
    code = main(["acls", *argv, "--bootstrap-server", broker.bootstrap])
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> list[str]:
    header, *lines = out.splitlines()
    assert header == "ResourceType\tName\tPatternType\tPrincipal\tHost\tOperation\tPermission"
    return lines


def produce_error(broker, topic: str) -> int | None:
    """alice produces one record; the delivery error code, None when it was written."""
    outcome = []
    config = scram_config(broker, "SCRAM-SHA-512", ALICE, PASSWORD)
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert len(outcome) == 1
    return None if outcome[0] is None else outcome[0].code()


def test_acls_added_and_removed_decide_what_alice_may_write(authz_broker, capsys):
    create_topic(authz_broker.bootstrap, "orders", 1)
    assert produce_error(authz_broker, "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    code, out, err = acls(
        capsys, authz_broker, "add", "--allow-principal", "User:alice",
        "--operation", "Write", "--operation", "describe", "--topic", "orders",
    )  # fmt: skip
    assert code == 0, err
    assert rows(out) == [
        "TOPIC\torders\tLITERAL\tUser:alice\t*\tWRITE\tALLOW",
        "TOPIC\torders\tLITERAL\tUser:alice\t*\tDESCRIBE\tALLOW",
    ]
    assert produce_error(authz_broker, "orders") is None

    deny = ("--deny-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    assert acls(capsys, authz_broker, "add", *deny)[0] == 0
    assert produce_error(authz_broker, "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    code, out, err = acls(capsys, authz_broker, "remove", *deny)
    assert code == 0, err
    assert rows(out) == ["TOPIC\torders\tLITERAL\tUser:alice\t*\tWRITE\tDENY"]
    assert produce_error(authz_broker, "orders") is None

    code, out, _ = acls(capsys, authz_broker, "remove", "--topic", "orders", "--force")
    assert sorted(rows(out)) == [
        "TOPIC\torders\tLITERAL\tUser:alice\t*\tDESCRIBE\tALLOW",
        "TOPIC\torders\tLITERAL\tUser:alice\t*\tWRITE\tALLOW",
    ]
    assert rows(acls(capsys, authz_broker, "list", "--topic", "orders")[1]) == []
    assert produce_error(authz_broker, "orders") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_list_filters_by_resource_pattern_and_principal(authz_broker, capsys):
    for argv in (
        ("--allow-principal", "User:bob", "--operation", "Read", "--group", "app-",
         "--resource-pattern-type", "prefixed"),
        ("--allow-principal", "User:carol", "--allow-host", "10.0.0.1", "--allow-host",
         "10.0.0.2", "--operation", "IdempotentWrite", "--cluster"),
        ("--allow-principal", "User:bob", "--operation", "Write", "--transactional-id", "tx-1"),
    ):  # fmt: skip
        code, _, err = acls(capsys, authz_broker, "add", *argv)
        assert code == 0, err
    everything = rows(acls(capsys, authz_broker, "list")[1])
    assert {
        "GROUP\tapp-\tPREFIXED\tUser:bob\t*\tREAD\tALLOW",
        "CLUSTER\tkafka-cluster\tLITERAL\tUser:carol\t10.0.0.1\tIDEMPOTENT_WRITE\tALLOW",
        "CLUSTER\tkafka-cluster\tLITERAL\tUser:carol\t10.0.0.2\tIDEMPOTENT_WRITE\tALLOW",
        "TRANSACTIONAL_ID\ttx-1\tLITERAL\tUser:bob\t*\tWRITE\tALLOW",
    } <= set(everything)
    # literal (the default) names only that exact pattern; match finds the prefixed one
    assert rows(acls(capsys, authz_broker, "list", "--group", "app-1")[1]) == []
    matched = acls(
        capsys, authz_broker, "list", "--group", "app-1", "--resource-pattern-type", "match"
    )
    assert rows(matched[1]) == ["GROUP\tapp-\tPREFIXED\tUser:bob\t*\tREAD\tALLOW"]
    bob = rows(acls(capsys, authz_broker, "list", "--principal", "User:bob")[1])
    assert sorted(bob) == [
        "GROUP\tapp-\tPREFIXED\tUser:bob\t*\tREAD\tALLOW",
        "TRANSACTIONAL_ID\ttx-1\tLITERAL\tUser:bob\t*\tWRITE\tALLOW",
    ]
    removed = acls(capsys, authz_broker, "remove", "--cluster", "--allow-principal", "User:carol",
                   "--allow-host", "10.0.0.1", "--operation", "IdempotentWrite")  # fmt: skip
    assert rows(removed[1]) == [
        "CLUSTER\tkafka-cluster\tLITERAL\tUser:carol\t10.0.0.1\tIDEMPOTENT_WRITE\tALLOW"
    ]
    left = rows(acls(capsys, authz_broker, "list", "--cluster")[1])
    assert left == [
        "CLUSTER\tkafka-cluster\tLITERAL\tUser:carol\t10.0.0.2\tIDEMPOTENT_WRITE\tALLOW"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("add", "--topic", "t"), "give --allow-principal and/or --deny-principal"),
        (("add", "--allow-principal", "User:x"), "give a resource"),
        (("add", "--allow-principal", "User:x", "--topic", "t", "--operation", "Fly"),
         "unknown operation 'Fly'"),
        (("add", "--allow-principal", "User:x", "--topic", "t", "--resource-pattern-type", "any"),
         "invalid choice: 'any'"),
        (("remove", "--allow-principal", "User:x"), "give a resource"),
    ],
)  # fmt: skip
def test_bad_usage_exits_2(authz_broker, capsys, argv, message):
    with pytest.raises(SystemExit) as exited:
        acls(capsys, authz_broker, *argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_an_invalid_entry_is_the_brokers_refusal(authz_broker, capsys):
    code, _, err = acls(capsys, authz_broker, "add", "--allow-principal", "alice", "--topic", "t")
    assert code == 1
    assert "INVALID_REQUEST" in err


def test_without_an_authorizer_the_broker_says_so(broker, capsys):
    code, _, err = acls(capsys, broker, "list")
    assert (code, err) == (
        1,
        "onceflow acls: DescribeAcls: SECURITY_DISABLED (No Authorizer is configured on the "
        "broker)\n",
    )
