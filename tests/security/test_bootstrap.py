"""`onceflow.sasl.bootstrap.users`: Kafka's `--add-scram` entries, applied only when absent."""

from __future__ import annotations

import base64

import pytest

from onceflow.security.bootstrap import bootstrap_users, parse_bootstrap_users
from onceflow.security.credentials import ScramCredentialStore
from onceflow.security.scram import ScramClient, ScramServer, password_matches, salted_password
from security.scram_helpers import SHA256, SHA512, exchange


def test_bootstrap_creates_absent_users_only(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    value = (
        "SCRAM-SHA-512=[name=admin,password=admin-secret]; "
        'SCRAM-SHA-256=[name=admin,password="admin-secret",iterations=8192]'
    )
    assert bootstrap_users(store, value) == [("admin", SHA512), ("admin", SHA256)]
    assert store.credential("admin", SHA256).iterations == 8192
    exchange(
        ScramServer(SHA512, lambda name: store.credential(name, SHA512)),
        ScramClient(SHA512, "admin", "admin-secret"),
    )
    changed = "SCRAM-SHA-512=[name=admin,password=other]"
    assert bootstrap_users(ScramCredentialStore(str(tmp_path)), changed) == []
    kept = ScramCredentialStore(str(tmp_path)).credential("admin", SHA512)
    assert password_matches(SHA512, kept, "admin-secret")


def test_salted_password_entry(tmp_path):
    salt = b"0123456789abcdef"
    salted = salted_password(SHA256, "pw", salt, 4096)
    value = (
        f"SCRAM-SHA-256=[name=alice,salt={base64.b64encode(salt).decode()},"
        f"saltedpassword={base64.b64encode(salted).decode()}]"
    )
    store = ScramCredentialStore(str(tmp_path))
    bootstrap_users(store, value)
    assert store.credential("alice", SHA256).salt == salt
    assert password_matches(SHA256, store.credential("alice", SHA256), "pw")


@pytest.mark.parametrize(
    "value, problem",
    [
        ("SCRAM-SHA-1=[name=a,password=p]", "expected SCRAM-SHA-256"),
        ("SCRAM-SHA-512", "expected SCRAM-SHA-256"),
        ("SCRAM-SHA-512=name=a,password=p", "enclosed in"),
        ("SCRAM-SHA-512=[password=p]", "'name' is required"),
        ("SCRAM-SHA-512=[name=a]", "one of 'password' or 'saltedpassword'"),
        ("SCRAM-SHA-512=[name=a,saltedpassword=AAAA]", "needs 'salt'"),
        ("SCRAM-SHA-512=[name=a,password=p,iterations=4095]", "between 4096 and 16384"),
        ("SCRAM-SHA-512=[name=a,password=p,iterations=16385]", "between 4096 and 16384"),
        ("SCRAM-SHA-512=[name=a,password=p,iterations=x]", "not an integer"),
        ("SCRAM-SHA-512=[name=a,password=p,salt=!!]", "'salt' is not base64"),
        ("SCRAM-SHA-512=[name=a,password=p,colour=red]", "unknown keys colour"),
        ("SCRAM-SHA-512=[name=a,password]", "no '='"),
        ("SCRAM-SHA-512=[name=a,password=p];SCRAM-SHA-512=[name=a,password=q]", "given twice"),
    ],
)
def test_invalid_entries(value, problem):
    with pytest.raises(ValueError, match="onceflow.sasl.bootstrap.users") as info:
        parse_bootstrap_users(value)
    assert problem in str(info.value)
    assert "password=p" not in str(info.value)  # the message never shows a password
