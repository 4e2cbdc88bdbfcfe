"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) in-process: Kafka's
answers for every per-user error, null meaning every user, the CLUSTER ACL each needs (checked
before anything changes), the write off the event loop, and a new credential logging in."""

from __future__ import annotations

import asyncio
import threading

import pytest
from security.scram_helpers import exchange

from broker.authz_helpers import ADMIN, ALICE, creation, grant
from broker.broker_helpers import call
from onceflow.broker.served_versions import SUPPORTED_VERSIONS
from onceflow.protocol.api_keys import ApiKey
from onceflow.protocol.errors import ErrorCode
from onceflow.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
)
from onceflow.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
)
from onceflow.security.acl import AclOperation, ResourceType
from onceflow.security.credentials import ScramCredentialStore
from onceflow.security.sasl import SaslAuthenticationError
from onceflow.security.scram import ScramClient, ScramMechanism, ScramServer, salted_password

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
_Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
_Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_UserName = DescribeUserScramCredentialsRequest.UserName
AUTHZ = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": ADMIN,
}


def upsertion(name, mechanism=SHA512, password="pw", iterations=4096, salt=b"some-salt"):
    return _Upsertion(
        name=name,
        mechanism=int(mechanism),
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations),
    )


def alter(state, deletions=(), upsertions=(), principal=ADMIN):
    request = AlterUserScramCredentialsRequest(
        deletions=list(deletions), upsertions=list(upsertions)
    )
    response = asyncio.run(
        call(state, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request, principal=principal)
    )
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def describe(state, users=None, principal=ADMIN):
    wanted = None if users is None else [_UserName(name=u) for u in users]
    request = DescribeUserScramCredentialsRequest(users=wanted)
    return asyncio.run(
        call(state, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, request, principal=principal)
    )


def described(response) -> dict:
    return {
        r.user: (r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
        for r in response.results
    }


def logs_in(store, mechanism, user, password) -> bool:
    server = ScramServer(mechanism, lambda name: store.credential(name, mechanism))
    try:
        exchange(server, ScramClient(mechanism, user, password))
    except SaslAuthenticationError:
        return False
    return True


def test_both_apis_are_advertised_at_v0():
    assert SUPPORTED_VERSIONS[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert SUPPORTED_VERSIONS[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)


def test_upsert_describe_log_in_delete(state):
    assert described(describe(state)) == {}
    result = alter(
        state,
        upsertions=[
            upsertion("alice", SHA512, "alice-pw", 8192),
            upsertion("bob", SHA256, "bob-pw"),
        ],
    )
    assert result == {"alice": (0, None), "bob": (0, None)}
    response = describe(state)
    assert response.error_code == ErrorCode.NONE
    assert described(response) == {"alice": (0, [(2, 8192)]), "bob": (0, [(1, 4096)])}
    # the next login uses the new credential; the store on disk has it too
    assert logs_in(state.credentials, SHA512, "alice", "alice-pw")
    assert not logs_in(state.credentials, SHA512, "alice", "wrong")
    assert ScramCredentialStore(state.config.data_dir).credential("alice", SHA512) is not None
    # a new password replaces the old one
    assert alter(state, upsertions=[upsertion("alice", SHA512, "new-pw", salt=b"s2")]) == {
        "alice": (0, None)
    }
    assert logs_in(state.credentials, SHA512, "alice", "new-pw")
    assert not logs_in(state.credentials, SHA512, "alice", "alice-pw")
    assert alter(state, deletions=[_Deletion(name="alice", mechanism=2)]) == {"alice": (0, None)}
    assert not logs_in(state.credentials, SHA512, "alice", "new-pw")
    assert described(describe(state)) == {"bob": (0, [(1, 4096)])}


def test_describe_named_users_missing_and_duplicates(state):
    alter(state, upsertions=[upsertion("alice")])
    response = describe(state, ["alice", "ghost", "bob", "bob"])
    assert described(response) == {
        "alice": (0, [(2, 4096)]),
        "ghost": (ErrorCode.RESOURCE_NOT_FOUND, []),
        "bob": (ErrorCode.DUPLICATE_RESOURCE, []),
    }
    messages = {r.user: r.error_message for r in response.results}
    assert messages["ghost"] == "Attempt to describe a user credential that does not exist: ghost"
    # an empty list, like null, is every user (Kafka's ScramImage.describe)
    assert described(describe(state, [])) == {"alice": (0, [(2, 4096)])}


def test_alter_answers_the_store_error_of_each_user(state):
    result = alter(
        state,
        deletions=[_Deletion(name="ghost", mechanism=2)],
        upsertions=[
            upsertion("twice"),
            upsertion("twice", SHA256),
            upsertion("few", iterations=100),
            upsertion("many", iterations=20_000),
            _Upsertion(
                name="odd", mechanism=9, iterations=4096, salt=b"s", salted_password=b"x" * 64
            ),
            upsertion(""),
            upsertion("fine"),
        ],
    )
    assert {user: code for user, (code, _) in result.items()} == {
        "ghost": ErrorCode.RESOURCE_NOT_FOUND,
        "twice": ErrorCode.DUPLICATE_RESOURCE,
        "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "odd": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "fine": ErrorCode.NONE,
    }
    assert result["few"][1] == "Too few iterations"
    assert described(describe(state)) == {"fine": (0, [(2, 4096)])}


def test_without_the_cluster_acls_nothing_is_read_or_changed(state_factory):
    state = state_factory(**AUTHZ)
    alter(state, upsertions=[upsertion("bob")])  # as the super user
    refused = alter(state, upsertions=[upsertion("mallory"), upsertion("bob")], principal=ALICE)
    assert refused == {
        "bob": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
        "mallory": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    }
    response = describe(state, principal=ALICE)
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert response.results == []
    assert set(state.credentials.users()) == {"bob"}
    # DESCRIBE on the cluster is enough to describe, not to alter; ALTER allows altering
    grant(state, creation(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE))
    assert described(describe(state, principal=ALICE)) == {"bob": (0, [(2, 4096)])}
    assert alter(state, upsertions=[upsertion("eve")], principal=ALICE)["eve"][0] == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    grant(state, creation(ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER))
    assert alter(state, upsertions=[upsertion("eve")], principal=ALICE) == {"eve": (0, None)}


def test_the_store_is_written_off_the_event_loop(state, monkeypatch):
    threads = []
    original = ScramCredentialStore.alter

    def recording(self, deletions, upsertions):
        threads.append(threading.current_thread())
        return original(self, deletions, upsertions)

    monkeypatch.setattr(ScramCredentialStore, "alter", recording)
    assert alter(state, upsertions=[upsertion("alice")]) == {"alice": (0, None)}
    assert threads and threads[0] is not threading.main_thread()


def test_a_store_that_cannot_be_written_changes_nothing(state, monkeypatch):
    def failing(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("onceflow.security.credentials.write_file_atomically", failing)
    result = alter(state, upsertions=[upsertion("alice")])
    assert result["alice"][0] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "disk full" in result["alice"][1]
    assert described(describe(state)) == {}


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_salted_password_from_the_client_is_what_the_server_checks(state, mechanism):
    alter(state, upsertions=[upsertion("carol", mechanism, "Ω-pässword", salt=b"\x00\x01salt")])
    assert logs_in(state.credentials, mechanism, "carol", "Ω-pässword")
