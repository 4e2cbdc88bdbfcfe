"""The SCRAM credential store: the file, KIP-554's alter/describe rules (Kafka's
ScramControlManager and ScramImage.describe), corruption, and kill -9 during writes."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from onceflow.protocol.errors import ErrorCode
from onceflow.security.credentials import (
    CREDENTIALS_FILE,
    AlterUserScramCredentialsResult,
    CredentialInfo,
    CredentialStoreCorruptError,
    DescribeUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialStore,
    ScramCredentialUpsertion,
)
from onceflow.security.scram import ScramClient, ScramServer, salted_password
from security.scram_helpers import SHA256, SHA512, exchange

SRC = str(Path(__file__).resolve().parents[2] / "src")


def upsert(name: str, mechanism=SHA512, password: str = "pw", iterations: int = 4096):
    salt = f"salt-{name}".encode()
    salted = salted_password(mechanism, password, salt, iterations)
    return ScramCredentialUpsertion(name, int(mechanism), iterations, salt, salted)


def delete(name: str, mechanism=SHA512):
    return ScramCredentialDeletion(name, int(mechanism))


def test_upserted_credentials_authenticate_after_a_reopen(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    results = store.alter([], [upsert("alice", SHA512, "pw-a"), upsert("bob", SHA256, "pw-b")])
    assert results == [
        AlterUserScramCredentialsResult("alice"),
        AlterUserScramCredentialsResult("bob"),
    ]
    reopened = ScramCredentialStore(str(tmp_path))
    for mechanism, user, password in [(SHA512, "alice", "pw-a"), (SHA256, "bob", "pw-b")]:
        server = ScramServer(mechanism, lambda name, m=mechanism: reopened.credential(name, m))
        exchange(server, ScramClient(mechanism, user, password))
    assert reopened.credential("alice", SHA256) is None


def test_the_file_is_private_and_holds_no_password(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter([], [upsert("alice", password="very-secret-password")])
    path = tmp_path / CREDENTIALS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    assert "very-secret-password" not in text
    entry = json.loads(text)["users"]["alice"]["SCRAM-SHA-512"]
    assert set(entry) == {"salt", "stored_key", "server_key", "iterations"}
    assert not (tmp_path / (CREDENTIALS_FILE + ".tmp")).exists()


def test_describe(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter([], [upsert("alice", SHA512), upsert("bob", SHA256, iterations=8192)])
    store.alter([], [upsert("alice", SHA256, iterations=5000)])
    alice = DescribeUserScramCredentialsResult(
        "alice", credential_infos=(CredentialInfo(1, 5000), CredentialInfo(2, 4096))
    )
    bob = DescribeUserScramCredentialsResult("bob", credential_infos=(CredentialInfo(1, 8192),))
    assert store.describe(None) == store.describe([]) == [alice, bob]
    assert store.describe(["bob", "carol", "alice", "bob"]) == [
        DescribeUserScramCredentialsResult(
            "bob",
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
        ),
        DescribeUserScramCredentialsResult(
            "carol",
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: carol",
        ),
        alice,
    ]


UNSUPPORTED = ErrorCode.UNSUPPORTED_SASL_MECHANISM


def codes(results) -> dict[str, ErrorCode]:
    return {result.user: result.error_code for result in results}


@pytest.mark.parametrize(
    "deletions, upsertions, expected",
    [
        ([], [upsert("u", iterations=4095)], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([], [upsert("u", iterations=16385)], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        ([], [upsert("")], ErrorCode.UNACCEPTABLE_CREDENTIAL),
        (
            [],
            [ScramCredentialUpsertion("u", 0, 4096, b"s", b"p")],
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ),
        (
            [],
            [ScramCredentialUpsertion("u", 3, 4096, b"s", b"p")],
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ),
        ([delete("u", SHA256)], [], ErrorCode.RESOURCE_NOT_FOUND),  # u has SHA-512 only
        ([delete("nobody")], [], ErrorCode.RESOURCE_NOT_FOUND),
        ([ScramCredentialDeletion("u", 0)], [], ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ([delete("u")], [upsert("u", SHA256)], ErrorCode.DUPLICATE_RESOURCE),
        ([], [upsert("u", SHA256), upsert("u", SHA512)], ErrorCode.DUPLICATE_RESOURCE),
        ([delete("u"), delete("u")], [], ErrorCode.DUPLICATE_RESOURCE),
    ],
)
def test_alter_refusals_change_nothing(tmp_path, deletions, upsertions, expected):
    store = ScramCredentialStore(str(tmp_path))
    store.alter([], [upsert("u", SHA512, "original")])
    before = (tmp_path / CREDENTIALS_FILE).read_bytes()
    name = (deletions or upsertions)[0].name
    assert codes(store.alter(deletions, upsertions)) == {name: expected}
    assert (tmp_path / CREDENTIALS_FILE).read_bytes() == before


def test_a_refused_user_does_not_stop_the_others(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter([], [upsert("old")])
    results = store.alter(
        [delete("old"), delete("ghost")], [upsert("new"), upsert("dup"), upsert("dup", SHA256)]
    )
    assert codes(results) == {
        "old": ErrorCode.NONE,
        "new": ErrorCode.NONE,
        "ghost": ErrorCode.RESOURCE_NOT_FOUND,
        "dup": ErrorCode.DUPLICATE_RESOURCE,
    }
    assert set(ScramCredentialStore(str(tmp_path)).users()) == {"new"}


def test_deleting_the_last_mechanism_removes_the_user(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter([], [upsert("u", SHA256)])
    store.alter([], [upsert("u", SHA512)])
    store.alter([delete("u", SHA256)], [])
    assert [r.credential_infos for r in store.describe(["u"])] == [(CredentialInfo(2, 4096),)]
    store.alter([delete("u", SHA512)], [])
    assert store.describe(["u"])[0].error_code is ErrorCode.RESOURCE_NOT_FOUND
    assert json.loads((tmp_path / CREDENTIALS_FILE).read_text())["users"] == {}


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"[]",
        b'{"version": 2, "users": {}}',
        b'{"version": 1}',
        b'{"version": 1, "users": {"u": {"SCRAM-SHA-1": {}}}}',
        b'{"version": 1, "users": {"u": {"SCRAM-SHA-512": {"salt": "!!", "stored_key": "",'
        b' "server_key": "", "iterations": 4096}}}}',
        b'{"version": 1, "users": {"u": {"SCRAM-SHA-512": {"salt": "", "stored_key": "",'
        b' "server_key": "", "iterations": "4096"}}}}',
        b'{"version": 1, "users": {"u": {"SCRAM-SHA-512": {"salt": ""}}}}',
        b'{"version": 1, "users": {"u": {}}}',
        b"\xff\xfe",
    ],
)
def test_a_corrupt_store_is_a_clear_error(tmp_path, content):
    (tmp_path / CREDENTIALS_FILE).write_bytes(content)
    with pytest.raises(CredentialStoreCorruptError, match="is corrupt"):
        ScramCredentialStore(str(tmp_path))


def test_a_failed_write_changes_nothing(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.alter([], [upsert("alice")])
    (tmp_path / (CREDENTIALS_FILE + ".tmp")).mkdir()  # the temp file cannot be created
    with pytest.raises(OSError):
        store.alter([], [upsert("bob")])
    assert set(store.users()) == {"alice"}


# A child rewrites the store in a loop; state i has users u0..u<i> and alice at 4096 + i.
WRITER = """
import sys
from onceflow.security.credentials import ScramCredentialStore, ScramCredentialUpsertion
store = ScramCredentialStore(sys.argv[1])
i = max(len(store.users()) - 1, 0)
print("ready", flush=True)
while True:
    store.alter([], [
        ScramCredentialUpsertion("alice", 2, 4096 + i % 10000, b"salt", b"x" * 64),
        ScramCredentialUpsertion(f"u{i}", 1, 4096, b"salt", b"y" * 32),
    ])
    i += 1
"""


def test_kill_during_writes_leaves_the_old_or_the_new_file(tmp_path):
    states_seen = set()
    for round_ in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            env={**os.environ, "PYTHONPATH": SRC},
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        time.sleep(0.05 + 0.03 * round_)
        child.send_signal(signal.SIGKILL)
        child.wait()
        store = ScramCredentialStore(str(tmp_path))  # raises if torn
        users = store.users()
        others = len(users) - 1
        assert others >= 1 and set(users) == {"alice"} | {f"u{i}" for i in range(others)}
        assert users["alice"][SHA512].iterations == 4096 + (others - 1) % 10000
        states_seen.add(others)
    assert len(states_seen) > 1  # the child made progress between kills
