"""The durable ACL set: round trip, a corrupt or torn file is a startup error (never an empty
set), the two-phase commit with the authorizer, and kill -9 in the middle of a loop of updates
leaves the old set or the new one."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import onceflow
from onceflow.security.acl import AclOperation, PatternType, ResourceType
from onceflow.security.acl_store import (
    FILE_NAME,
    AclStore,
    AclStoreCorruptError,
    decode_acls,
    encode_acls,
)
from onceflow.security.authorizer import AclAuthorizer
from security.acl_helpers import ALICE, HOST, PREFIXED, TOPIC, allow, binding_filter, deny

Op = AclOperation
ACLS = [
    allow(Op.READ, "orders"),
    deny(Op.ALL, "secret-", pattern_type=PREFIXED, principal="User:*", host="10.9.9.9"),
    allow(Op.IDEMPOTENT_WRITE, "kafka-cluster", resource_type=ResourceType.CLUSTER),
    allow(Op.DESCRIBE, "*", resource_type=ResourceType.GROUP, principal="User:ü:ñ"),
]


def test_round_trip(tmp_path: Path):
    store = AclStore(str(tmp_path))
    assert store.load() == []  # no file: a new data directory
    store.save(ACLS)
    assert store.load() == ACLS
    store.save([])
    assert store.load() == []
    assert not (tmp_path / (FILE_NAME + ".tmp")).exists()


def test_file_is_readable_json(tmp_path: Path):
    AclStore(str(tmp_path)).save(ACLS[:2])
    document = json.loads((tmp_path / FILE_NAME).read_text())
    assert document["version"] == 1 and document["count"] == 2
    assert document["acls"][1] == {
        "resource_type": "TOPIC",
        "pattern_type": "PREFIXED",
        "name": "secret-",
        "principal": "User:*",
        "host": "10.9.9.9",
        "operation": "ALL",
        "permission_type": "DENY",
    }


def tampered(field: str, value) -> bytes:
    document = json.loads(encode_acls(ACLS))
    document["acls"][1][field] = value
    return json.dumps(document).encode()


def rehashed(document_bytes: bytes) -> bytes:
    """The document with its checksum recomputed (the file format: SHA-256 of the ACL list as
    compact JSON with sorted keys), so only the bad ACL itself is wrong."""
    document = json.loads(document_bytes)
    canonical = json.dumps(document["acls"], sort_keys=True, separators=(",", ":"))
    document["sha256"] = hashlib.sha256(canonical.encode()).hexdigest()
    return json.dumps(document).encode()


GOOD = encode_acls(ACLS)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not valid JSON"),
        (GOOD[: len(GOOD) // 2], "not valid JSON"),  # torn
        (GOOD[:-3], "not valid JSON"),
        (b"\xff\xfe garbage", "not valid JSON"),
        (b"[]", "format version"),
        (GOOD.replace(b'"version": 1', b'"version": 2'), "format version"),
        (GOOD.replace(b'"count": 4', b'"count": 3'), "count"),
        (GOOD.replace(b"secret-", b"secres-"), "checksum mismatch"),  # a flipped byte
        (GOOD.replace(b'"DENY"', b'"ALLOW"'), "checksum mismatch"),
        (tampered("permission_type", "ALLOW"), "checksum mismatch"),
        (rehashed(tampered("permission_type", "MAYBE")), "ACL #1 is malformed"),
        (rehashed(tampered("pattern_type", "MATCH")), "ACL #1 is invalid: Invalid patternType"),
        (rehashed(tampered("name", "")), "ACL #1 is invalid: Resource name should not be empty"),
    ],
)
def test_corrupt_file_is_a_startup_error(tmp_path: Path, content: bytes, reason: str):
    (tmp_path / FILE_NAME).write_bytes(content)
    with pytest.raises(AclStoreCorruptError, match="refusing to start") as raised:
        AclStore(str(tmp_path)).load()
    assert reason in raised.value.reason
    with pytest.raises(ValueError, match=reason):
        decode_acls(content)


def test_rehashed_helper_makes_a_valid_file():
    assert decode_acls(rehashed(GOOD)) == ACLS


def test_stray_temp_file_is_ignored(tmp_path: Path):
    store = AclStore(str(tmp_path))
    store.save(ACLS)
    (tmp_path / (FILE_NAME + ".tmp")).write_bytes(GOOD[:10])
    assert store.load() == ACLS
    store.save(ACLS[:1])
    assert store.load() == ACLS[:1]


def test_commit_stores_then_applies(tmp_path: Path):
    store = AclStore(str(tmp_path))
    authorizer = AclAuthorizer(store.load())
    _, update = authorizer.prepare_create_acls(ACLS)
    store.commit(authorizer, update)
    assert set(store.load()) == set(authorizer.bindings()) == set(ACLS)
    _, update = authorizer.prepare_delete_acls([binding_filter(TOPIC, "orders")])
    store.commit(authorizer, update)
    assert set(store.load()) == set(authorizer.bindings()) == set(ACLS[1:])
    assert not authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")


def test_failed_store_leaves_memory_and_file_unchanged(tmp_path: Path, monkeypatch):
    store = AclStore(str(tmp_path))
    store.save(ACLS[:1])
    authorizer = AclAuthorizer(store.load())

    def failing_write(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("onceflow.security.acl_store.write_file_atomically", failing_write)
    _, update = authorizer.prepare_delete_acls([binding_filter()])
    with pytest.raises(OSError, match="No space"):
        store.commit(authorizer, update)
    assert authorizer.bindings() == ACLS[:1]
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")
    authorizer.prepare_create_acls([])  # the failed update is no longer pending
    monkeypatch.undo()
    assert store.load() == ACLS[:1]


# the child rewrites the ACL file forever; generation n holds the ACLs gen_acls(n)
CHILD = textwrap.dedent(
    """
    import sys
    from onceflow.security.acl import (
        AccessControlEntry, AclBinding, AclOperation, PatternType, PermissionType,
        ResourcePattern, ResourceType,
    )
    from onceflow.security.acl_store import AclStore

    def gen_acls(n):
        return [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, f"gen{n}-topic{k}", PatternType.PREFIXED),
                AccessControlEntry("User:*", "*", AclOperation.READ, PermissionType.DENY),
            )
            for k in range(1 + n % 7 * 150)
        ]

    store = AclStore(sys.argv[1])
    n = 0
    while True:
        store.save(gen_acls(n))
        print(n, flush=True)
        n += 1
    """
)


ATTEMPTS = 24  # each kill lands in a random place; a torn write was caught in 2 of 3 runs of 12


def test_kill_9_mid_update_leaves_old_or_new_set(tmp_path: Path):
    env = dict(os.environ, PYTHONPATH=str(Path(onceflow.__file__).parent.parent))
    rng = random.Random(10)
    for attempt in range(ATTEMPTS):
        data_dir = tmp_path / f"run{attempt}"
        data_dir.mkdir()
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(data_dir)], stdout=subprocess.PIPE, env=env
        )
        try:
            saved = [int(child.stdout.readline()) for _ in range(rng.randint(1, 10))]
            time.sleep(rng.uniform(0, 0.02))  # then kill it anywhere in the loop
            os.kill(child.pid, signal.SIGKILL)
            saved += [int(line) for line in child.stdout.read().split()]
        finally:
            child.kill()
            child.wait()
            child.stdout.close()
        stored = AclStore(str(data_dir)).load()
        generation = int(stored[0].pattern.name.removeprefix("gen").split("-")[0])
        # the last save reported complete, or the one under way
        assert generation in (saved[-1], saved[-1] + 1)
        assert len(stored) == 1 + generation % 7 * 150
        assert all(b.pattern.name.startswith(f"gen{generation}-") for b in stored)
        assert all(b.pattern.pattern_type == PatternType.PREFIXED for b in stored)
