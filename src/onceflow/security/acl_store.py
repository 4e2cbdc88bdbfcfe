"""The durable ACL set: `<data dir>/acls.json`, rewritten whole on every change and read at start.

Kafka keeps ACLs as records in its metadata log; onceflow keeps the whole set in one small
file, replaced atomically (`log.fsutil.write_file_atomically`: temp file, fsync, rename, fsync
of the directory), so a crash at any point (kill -9, power loss) leaves the old set or the new
one, never a mix. A stray `acls.json.tmp` left by a crash is ignored and overwritten later.

The file is JSON: a format version, the number of ACLs, a SHA-256 of the canonical encoding of
the ACL list, and the list itself with Kafka's enum names (`TOPIC`, `PREFIXED`, `DENY`, ...).

A file that cannot be read back exactly (bad JSON, wrong version, count or checksum, an unknown
enum name, an ACL that CreateAcls would refuse) is a startup error, `AclStoreCorruptError`,
never an empty set: an empty set denies everyone when `allow.everyone.if.no.acl.found` is false,
or allows everyone when it is true, and silently losing a DENY ACL would open access the
operator closed. The operator restores the file from a backup, or removes it to start with no
ACLs on purpose. An absent file is the empty set (a new data directory). Editing the file by
hand is not supported (the checksum refuses it); use CreateAcls/DeleteAcls (`kafka-acls.sh`).

`save` and `commit` block on fsync: call them from a worker thread, not the event loop.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from typing import Final

from onceflow.log.fsutil import write_file_atomically
from onceflow.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    new_binding_error,
)
from onceflow.security.authorizer import AclAuthorizer, AclUpdate

FILE_NAME: Final = "acls.json"
FORMAT_VERSION: Final = 1


class AclStoreCorruptError(Exception):
    """The stored ACL file exists but cannot be read back; the broker must not start."""

    def __init__(self, path: str, reason: str):
        super().__init__(
            f"ACL file {path} is corrupt ({reason}); refusing to start with a partial or "
            f"empty ACL set. Restore it from a backup, or remove it to start with no ACLs."
        )
        self.path = path
        self.reason = reason


def _canonical(acls: list[dict[str, str]]) -> bytes:
    return json.dumps(acls, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def encode_acls(bindings: Iterable[AclBinding]) -> bytes:
    """The file content for `bindings`."""
    acls = [
        {
            "resource_type": b.pattern.resource_type.name,
            "pattern_type": b.pattern.pattern_type.name,
            "name": b.pattern.name,
            "principal": b.entry.principal,
            "host": b.entry.host,
            "operation": b.entry.operation.name,
            "permission_type": b.entry.permission_type.name,
        }
        for b in bindings
    ]
    document = {
        "version": FORMAT_VERSION,
        "count": len(acls),
        "sha256": hashlib.sha256(_canonical(acls)).hexdigest(),
        "acls": acls,
    }
    return json.dumps(document, indent=1, ensure_ascii=True).encode() + b"\n"


def decode_acls(data: bytes) -> list[AclBinding]:
    """The bindings stored in `data`; ValueError (with the reason) unless it reads back whole."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise ValueError(f"not an ACL file of format version {FORMAT_VERSION}")
    acls = document.get("acls")
    if not isinstance(acls, list) or document.get("count") != len(acls):
        raise ValueError("the ACL count does not match the list")
    if document.get("sha256") != hashlib.sha256(_canonical(acls)).hexdigest():
        raise ValueError("checksum mismatch")
    bindings = []
    for index, acl in enumerate(acls):
        try:
            binding = AclBinding(
                ResourcePattern(
                    ResourceType[acl["resource_type"]],
                    str(acl["name"]),
                    PatternType[acl["pattern_type"]],
                ),
                AccessControlEntry(
                    str(acl["principal"]),
                    str(acl["host"]),
                    AclOperation[acl["operation"]],
                    PermissionType[acl["permission_type"]],
                ),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"ACL #{index} is malformed: {exc!r}") from None
        reason = new_binding_error(binding)
        if reason is not None:
            raise ValueError(f"ACL #{index} is invalid: {reason}")
        bindings.append(binding)
    return bindings


class AclStore:
    """The ACL file of one data directory."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, FILE_NAME)

    def load(self) -> list[AclBinding]:
        """The stored ACLs ([] when there is no file); AclStoreCorruptError when unreadable."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        try:
            return decode_acls(data)
        except ValueError as exc:
            raise AclStoreCorruptError(self.path, str(exc)) from None

    def save(self, bindings: Iterable[AclBinding]) -> None:
        """Replace the stored set with `bindings`, atomically and durably (blocking)."""
        write_file_atomically(self.path, encode_acls(bindings))

    def commit(self, authorizer: AclAuthorizer, update: AclUpdate) -> None:
        """Store the set `update` leads to, then apply it; on a storage failure drop it and
        re-raise (the in-memory set stays what is stored)."""
        try:
            self.save(authorizer.bindings_after(update))
        except BaseException:
            authorizer.abort_update(update)
            raise
        authorizer.complete_update(update)
