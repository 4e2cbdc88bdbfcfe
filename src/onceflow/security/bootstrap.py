"""The first users of a fresh broker, from the broker config key `onceflow.sasl.bootstrap.users`.

Its value is one or more entries in the format of Kafka KRaft's `kafka-storage.sh format
--add-scram` argument, separated by `;`:

    onceflow.sasl.bootstrap.users=SCRAM-SHA-512=[name=admin,password=admin-secret];\
SCRAM-SHA-256=[name=admin,password=admin-secret]

Inside the brackets, comma-separated `key=value` pairs (a value may be wrapped in double quotes,
which are dropped, as Kafka does): `name` (required); `password`, or `saltedpassword` (base64)
together with `salt` (base64); `salt` (default random); `iterations` (default 4096, between 4096
and 16384). Neither a password nor a name can hold `,` or `;`.

Kafka applies `--add-scram` once, when it formats the storage; onceflow applies the key on every
start but only adds a (user, mechanism) credential that is absent, so a password changed later
through AlterUserScramCredentials is not reset by a restart. The password stays in the broker's
config file; remove it once the broker has started once.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Final

from onceflow.security.credentials import ScramCredentialStore
from onceflow.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    make_credential,
)

__all__ = ["BOOTSTRAP_USERS_CONFIG", "BootstrapUser", "bootstrap_users", "parse_bootstrap_users"]

BOOTSTRAP_USERS_CONFIG: Final = "onceflow.sasl.bootstrap.users"
_KEYS: Final = frozenset({"name", "password", "saltedpassword", "salt", "iterations"})


@dataclass(frozen=True)
class BootstrapUser:
    name: str
    mechanism: ScramMechanism
    iterations: int
    salt: bytes | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    salted_password: bytes | None = field(default=None, repr=False)

    def credential(self) -> ScramCredential:
        if self.password is not None:
            return make_credential(self.mechanism, self.password, self.iterations, self.salt)
        if self.salted_password is None or self.salt is None:
            raise ValueError(f"bootstrap user {self.name!r} has neither a password nor a salt")
        return credential_from_salted_password(
            self.mechanism, self.salted_password, self.salt, self.iterations
        )


def _error(entry: str, problem: str) -> ValueError:
    shown = entry.partition("=")[0]  # the mechanism only: never echo a password
    return ValueError(f"Invalid {BOOTSTRAP_USERS_CONFIG} entry '{shown}=...': {problem}")


def _base64(entry: str, key: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise _error(entry, f"'{key}' is not base64") from None


def _parse_entry(entry: str) -> BootstrapUser:
    mechanism_name, sep, config = entry.partition("=")
    mechanism = ScramMechanism.from_mechanism_name(mechanism_name.strip())
    if not sep or mechanism is None:
        raise _error(entry, "expected SCRAM-SHA-256=[...] or SCRAM-SHA-512=[...]")
    if not (config.startswith("[") and config.endswith("]")):
        raise _error(entry, "the configuration must be enclosed in [ ]")
    values: dict[str, str] = {}
    for component in config[1:-1].split(","):
        key, sep, value = component.partition("=")
        if not sep:
            raise _error(entry, f"no '=' in component '{key}'")
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        values[key] = value
    unknown = sorted(set(values) - _KEYS)
    if unknown:
        raise _error(entry, f"unknown keys {', '.join(unknown)}")
    if not values.get("name"):
        raise _error(entry, "'name' is required")
    salt = _base64(entry, "salt", values["salt"]) if "salt" in values else None
    try:
        iterations = int(values.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise _error(entry, "'iterations' is not an integer") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise _error(entry, f"'iterations' must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    if "password" in values:
        return BootstrapUser(values["name"], mechanism, iterations, salt, values["password"])
    if "saltedpassword" not in values:
        raise _error(entry, "one of 'password' or 'saltedpassword' is required")
    if salt is None:
        raise _error(entry, "'saltedpassword' needs 'salt'")
    salted = _base64(entry, "saltedpassword", values["saltedpassword"])
    return BootstrapUser(values["name"], mechanism, iterations, salt, None, salted)


def parse_bootstrap_users(value: str) -> list[BootstrapUser]:
    """The entries of the config value; raises ValueError (naming the key) when one is invalid
    or a (user, mechanism) pair is given twice."""
    users = [_parse_entry(entry.strip()) for entry in value.split(";") if entry.strip()]
    seen: set[tuple[str, ScramMechanism]] = set()
    for user in users:
        if (user.name, user.mechanism) in seen:
            raise ValueError(
                f"Invalid {BOOTSTRAP_USERS_CONFIG}: {user.mechanism.mechanism_name} for user "
                f"'{user.name}' is given twice"
            )
        seen.add((user.name, user.mechanism))
    return users


def bootstrap_users(store: ScramCredentialStore, value: str) -> list[tuple[str, ScramMechanism]]:
    """Add each configured credential the store lacks; returns the (user, mechanism) pairs added.
    Blocking (PBKDF2, fsync): call it at start, before the listeners open."""
    added = []
    for user in parse_bootstrap_users(value):
        if store.credential(user.name, user.mechanism) is None:
            if store.add_if_absent(user.name, user.mechanism, user.credential()):
                added.append((user.name, user.mechanism))
    return added
