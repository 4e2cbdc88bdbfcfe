"""KIP-554 user management from real admin clients against a broker process: confluent-kafka's
(librdkafka) and kafka-python's `alter_user_scram_credentials` / `describe_user_scram_credentials`
create users that can then log in with SCRAM on the SASL_PLAINTEXT listener; deleting a
credential makes the next login fail; per-user errors reach the client."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from support.sasl_broker import scram_login_works, start_sasl_broker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    broker = start_sasl_broker(tmp_path_factory.mktemp("scram-admin") / "data")
    yield broker
    broker.stop()


def _user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def _error_of(future) -> int:
    """The error code a confluent-kafka admin future fails with."""
    with pytest.raises(KafkaException) as raised:
        future.result(30)
    return raised.value.args[0].code()


def test_confluent_kafka_creates_describes_and_deletes_users(sasl_broker):
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    user = _user()
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    futures = admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(user, sha512, b"pw-512"),
            UserScramCredentialUpsertion(user + "-b", sha256, b"pw-256"),
        ]
    )
    for future in futures.values():
        assert future.result(30) is None
    described = admin.describe_user_scram_credentials([user, user + "-b"])
    infos = {
        name: sorted((i.mechanism, i.iterations) for i in f.result(30).scram_credential_infos)
        for name, f in described.items()
    }
    assert infos == {
        user: [(ScramMechanism.SCRAM_SHA_512, 8192)],
        user + "-b": [(ScramMechanism.SCRAM_SHA_256, 4096)],
    }
    everyone = admin.describe_user_scram_credentials().result(30)  # null list: every user
    assert {user, user + "-b"} <= set(everyone)

    assert scram_login_works(sasl_broker, "SCRAM-SHA-512", user, "pw-512")
    assert not scram_login_works(sasl_broker, "SCRAM-SHA-512", user, "wrong")
    assert scram_login_works(sasl_broker, "SCRAM-SHA-256", user + "-b", "pw-256")

    deleted = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]
    )
    assert deleted[user].result(30) is None
    assert not scram_login_works(sasl_broker, "SCRAM-SHA-512", user, "pw-512")
    # per-user errors: the credential is gone now
    again = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]
    )
    assert _error_of(again[user]) == KafkaError.RESOURCE_NOT_FOUND
    missing = admin.describe_user_scram_credentials([user])
    assert _error_of(missing[user]) == KafkaError.RESOURCE_NOT_FOUND


def test_confluent_kafka_too_few_iterations_is_unacceptable(sasl_broker):
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    user = _user()
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, b"pw")])
    assert _error_of(futures[user]) == KafkaError.UNACCEPTABLE_CREDENTIAL


def test_kafka_python_creates_describes_and_deletes_users(sasl_broker):
    from kafka import admin as kafka_python

    sha256 = kafka_python.ScramMechanism.SCRAM_SHA_256
    admin = kafka_python.KafkaAdminClient(bootstrap_servers=sasl_broker.bootstrap)
    user = _user()
    try:
        upsert = kafka_python.UserScramCredentialUpsertion(user, sha256, "kp-pw", iterations=4096)
        assert admin.alter_user_scram_credentials([upsert]) == {user: None}
        described = admin.describe_user_scram_credentials([user])
        assert described[user]["error"] is None
        assert [(i["mechanism"], i["iterations"]) for i in described[user]["credential_infos"]] == [
            (sha256, 4096)
        ]
        assert user in admin.describe_user_scram_credentials()
        assert scram_login_works(sasl_broker, "SCRAM-SHA-256", user, "kp-pw")
        delete = kafka_python.UserScramCredentialDeletion(user, sha256)
        assert admin.alter_user_scram_credentials([delete]) == {user: None}
        assert not scram_login_works(sasl_broker, "SCRAM-SHA-256", user, "kp-pw")
    finally:
        admin.close()
