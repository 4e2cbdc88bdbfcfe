"""The durable SCRAM credential store: `<data dir>/scram-credentials.json`, and the operations of
KIP-554's AlterUserScramCredentials and DescribeUserScramCredentials on it.

The file holds, per user and mechanism, the salt, StoredKey, ServerKey and iteration count,
never a password:

    {"version": 1, "users": {"admin": {"SCRAM-SHA-512":
        {"salt": "<base64>", "stored_key": "<base64>", "server_key": "<base64>",
         "iterations": 4096}}}}

It is replaced whole on every change: a temp file created with mode 0600, written, fsynced,
renamed over the old one, then the directory fsynced, so a crash leaves the old or the new file.
(`log.fsutil.write_file_atomically` does the same with mode 0644; this module has its own
helper for the 0600 mode rather than change `log/`. The two can become one with a `mode`
parameter.) A file that cannot be read as such a store stops the start with
`CredentialStoreCorruptError`; onceflow never guesses credentials.

Thread-safe: changes are serialized by a lock, each builds a new mapping that is swapped in only
after the file is durable, and readers (the SASL servers) read whichever mapping is current. The
writes block (fsync): the broker should call `alter` off its event loop.

Error rules follow Kafka's `ScramControlManager` (alter) and `ScramImage.describe`.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from onceflow.log.fsutil import write_file_atomically
from onceflow.protocol.errors import ErrorCode
from onceflow.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    fake_credential,
    password_matches,
)

__all__ = [
    "CREDENTIALS_FILE",
    "AlterUserScramCredentialsResult",
    "CredentialInfo",
    "CredentialStoreCorruptError",
    "DescribeUserScramCredentialsResult",
    "ScramCredentialDeletion",
    "ScramCredentialStore",
    "ScramCredentialUpsertion",
]

CREDENTIALS_FILE: Final = "scram-credentials.json"
FORMAT_VERSION: Final = 1
# PLAIN checks a password against the first of these the user has.
PLAIN_MECHANISM_PREFERENCE: Final = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)

ALTERED_TWICE: Final = "A user credential cannot be altered twice in the same request"
DELETE_MISSING: Final = "Attempt to delete a user credential that does not exist"
DESCRIBE_MISSING: Final = "Attempt to describe a user credential that does not exist: "
DESCRIBE_TWICE: Final = (
    "Cannot describe SCRAM credentials for the same user twice in a single request: "
)

_MECHANISM_TYPES: Final = frozenset(int(m) for m in ScramMechanism)

Users = Mapping[str, Mapping[ScramMechanism, ScramCredential]]


class CredentialStoreCorruptError(Exception):
    """The credential file exists but is not a valid store."""


@dataclass(frozen=True)
class ScramCredentialDeletion:
    name: str
    mechanism: int  # KIP-554's type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512, others unknown


@dataclass(frozen=True)
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True)
class AlterUserScramCredentialsResult:
    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class CredentialInfo:
    mechanism: int
    iterations: int


@dataclass(frozen=True)
class DescribeUserScramCredentialsResult:
    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    credential_infos: tuple[CredentialInfo, ...] = ()


def _validate_name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in _MECHANISM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def _validate_upsertion(upsertion: ScramCredentialUpsertion) -> tuple[ErrorCode, str] | None:
    error = _validate_name_and_mechanism(upsertion.name, upsertion.mechanism)
    if error is not None:
        return error
    if upsertion.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if upsertion.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    return None


class ScramCredentialStore:
    """The users of one data directory; loads the file on construction."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, CREDENTIALS_FILE)
        self._lock = threading.Lock()
        self._users: Users = _load(self.path)

    # -- reading (the SASL servers) --------------------------------------------------------

    def credential(self, username: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._users.get(username, {}).get(mechanism)

    def verify_password(self, username: str, password: str) -> bool:
        """PLAIN's check: recompute StoredKey from `password` with the user's SCRAM-SHA-512 (else
        SCRAM-SHA-256) credential. An unknown user costs the same PBKDF2 work and fails."""
        mechanisms = self._users.get(username, {})
        for mechanism in PLAIN_MECHANISM_PREFERENCE:
            if mechanism in mechanisms:
                return password_matches(mechanism, mechanisms[mechanism], password)
        mechanism = PLAIN_MECHANISM_PREFERENCE[0]
        password_matches(mechanism, fake_credential(mechanism, username), password)
        return False

    def users(self) -> Users:
        return self._users

    # -- KIP-554 ---------------------------------------------------------------------------

    def describe(self, users: Sequence[str] | None) -> list[DescribeUserScramCredentialsResult]:
        """DescribeUserScramCredentials: None or empty means every user. Never returns keys."""
        current = self._users
        counts = Counter(users or ())
        requested = list(counts) if counts else sorted(current)
        results = []
        for name in requested:
            if counts[name] > 1:
                results.append(
                    DescribeUserScramCredentialsResult(
                        name, ErrorCode.DUPLICATE_RESOURCE, DESCRIBE_TWICE + name
                    )
                )
            elif name not in current:
                results.append(
                    DescribeUserScramCredentialsResult(
                        name, ErrorCode.RESOURCE_NOT_FOUND, DESCRIBE_MISSING + name
                    )
                )
            else:
                infos = tuple(
                    CredentialInfo(int(mechanism), credential.iterations)
                    for mechanism, credential in sorted(current[name].items())
                )
                results.append(DescribeUserScramCredentialsResult(name, credential_infos=infos))
        return results

    def alter(
        self,
        deletions: Sequence[ScramCredentialDeletion],
        upsertions: Sequence[ScramCredentialUpsertion],
    ) -> list[AlterUserScramCredentialsResult]:
        """AlterUserScramCredentials: the valid alterations are applied together (one file
        write), each user gets one result. A user named twice in the request (any mechanisms,
        deletions and upsertions alike) gets DUPLICATE_RESOURCE and none of its alterations.
        Raises OSError, changing nothing, when the file cannot be written."""
        with self._lock:
            users = {name: dict(mechanisms) for name, mechanisms in self._users.items()}
            errors: dict[str, tuple[ErrorCode, str]] = {}
            valid: dict[str, ScramCredentialDeletion | ScramCredentialUpsertion] = {}
            alterations: list[ScramCredentialDeletion | ScramCredentialUpsertion]
            alterations = [*deletions, *upsertions]
            for alteration in alterations:
                name = alteration.name
                if name in errors:
                    continue
                if valid.pop(name, None) is not None:
                    errors[name] = (ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE)
                    continue
                if isinstance(alteration, ScramCredentialDeletion):
                    error = _validate_name_and_mechanism(name, alteration.mechanism)
                    if error is None and alteration.mechanism not in users.get(name, {}):
                        error = (ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING)
                else:
                    error = _validate_upsertion(alteration)
                if error is not None:
                    errors[name] = error
                else:
                    valid[name] = alteration
            for alteration in valid.values():
                _apply(users, alteration)
            if valid:
                self._replace(users)
        ordered = sorted(valid.values(), key=lambda a: isinstance(a, ScramCredentialUpsertion))
        return [AlterUserScramCredentialsResult(a.name) for a in ordered] + [
            AlterUserScramCredentialsResult(name, code, message)
            for name, (code, message) in errors.items()
        ]

    def add_if_absent(
        self, username: str, mechanism: ScramMechanism, credential: ScramCredential
    ) -> bool:
        """Store `credential` unless the user already has one for `mechanism` (bootstrap)."""
        with self._lock:
            if mechanism in self._users.get(username, {}):
                return False
            users = {name: dict(mechanisms) for name, mechanisms in self._users.items()}
            users.setdefault(username, {})[mechanism] = credential
            self._replace(users)
            return True

    def _replace(self, users: dict[str, dict[ScramMechanism, ScramCredential]]) -> None:
        write_file_atomically(self.path, _encode(users), mode=0o600)
        self._users = MappingProxyType(
            {name: MappingProxyType(mechanisms) for name, mechanisms in users.items()}
        )


def _apply(
    users: dict[str, dict[ScramMechanism, ScramCredential]],
    alteration: ScramCredentialDeletion | ScramCredentialUpsertion,
) -> None:
    mechanism = ScramMechanism(alteration.mechanism)
    if isinstance(alteration, ScramCredentialDeletion):
        del users[alteration.name][mechanism]
        if not users[alteration.name]:
            del users[alteration.name]
        return
    users.setdefault(alteration.name, {})[mechanism] = credential_from_salted_password(
        mechanism, alteration.salted_password, alteration.salt, alteration.iterations
    )


# -- the file ------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode(users: Users) -> bytes:
    document = {
        "version": FORMAT_VERSION,
        "users": {
            name: {
                mechanism.mechanism_name: {
                    "salt": _b64(credential.salt),
                    "stored_key": _b64(credential.stored_key),
                    "server_key": _b64(credential.server_key),
                    "iterations": credential.iterations,
                }
                for mechanism, credential in sorted(mechanisms.items())
            }
            for name, mechanisms in sorted(users.items())
        },
    }
    return (json.dumps(document, indent=1) + "\n").encode("utf-8")


def _load(path: str) -> Users:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return MappingProxyType({})
    try:
        document = json.loads(raw)
        if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
            raise ValueError(f"expected an object with version {FORMAT_VERSION}")
        users = document["users"]
        if not isinstance(users, dict):
            raise ValueError("'users' is not an object")
        loaded = {name: _decode_user(name, mechanisms) for name, mechanisms in users.items()}
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise CredentialStoreCorruptError(
            f"The SCRAM credential store {path} is corrupt ({exc}); restore it from a backup or "
            f"remove it and bootstrap the users again"
        ) from None
    return MappingProxyType({name: MappingProxyType(m) for name, m in loaded.items()})


def _decode_user(name: Any, mechanisms: Any) -> dict[ScramMechanism, ScramCredential]:
    if not isinstance(name, str) or not name or not isinstance(mechanisms, dict) or not mechanisms:
        raise ValueError(f"invalid user entry {name!r}")
    decoded = {}
    for mechanism_name, fields in mechanisms.items():
        mechanism = ScramMechanism.from_mechanism_name(mechanism_name)
        if mechanism is None:
            raise ValueError(f"unknown mechanism {mechanism_name!r} for user {name!r}")
        iterations = fields["iterations"]
        if type(iterations) is not int or iterations <= 0:
            raise ValueError(f"invalid iterations for user {name!r}")
        decoded[mechanism] = ScramCredential(
            salt=base64.b64decode(fields["salt"], validate=True),
            stored_key=base64.b64decode(fields["stored_key"], validate=True),
            server_key=base64.b64decode(fields["server_key"], validate=True),
            iterations=iterations,
        )
    return decoded
