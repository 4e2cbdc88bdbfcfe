"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them: credentials, the
key derivations, and the server and client state machines (bytes in, bytes out; no I/O).

    SaltedPassword  = PBKDF2-HMAC(H, UTF-8(password), salt, iterations)
    ClientKey       = HMAC(SaltedPassword, "Client Key")     StoredKey = H(ClientKey)
    ServerKey       = HMAC(SaltedPassword, "Server Key")
    AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
    ClientProof     = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

The server keeps only (salt, StoredKey, ServerKey, iterations). It checks a proof by recovering
ClientKey from it and comparing H(ClientKey) with StoredKey in constant time.

Server state machine (the table `_SERVER_NEXT` below):

    EXPECTING_CLIENT_FIRST --client-first--> EXPECTING_CLIENT_FINAL --client-final--> COMPLETE
    any state --bad token / wrong proof / a token after COMPLETE or FAILED--> FAILED

Choices, beside Kafka's own rules (gs2 header `n` only, authzid equal to the user name, nonce
continuity, iterations >= 4096):

- Unknown user: the server answers the client-first with a fake credential (a salt derived from a
  per-process secret and the name, so it stays the same across attempts; 4096 iterations) and
  fails at the client-final with the same error as a wrong password. Kafka fails an unknown user
  already at the client-first, which tells a prober the name does not exist.
- `tokenauth=true` (Kafka's delegation-token extension): refused with the generic error, as
  onceflow has no delegation tokens; authenticating the token id as a user name would be wrong.
  Other extensions are ignored, as Kafka and RFC 5802 do.
- `c=` of the client-final must be the base64 of the gs2 header the client-first sent (RFC 5802
  requires it; Kafka does not check).
- The client-final nonce must end with the server-first's nonce, as Kafka checks (RFC 5802 wants
  it equal; librdkafka before 2.1 sends the client nonce twice).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import Final

from onceflow.security.sasl import (
    IllegalSaslStateError,
    SaslAuthenticationError,
    authorization_id_of,
    generic_failure,
)
from onceflow.security.scram_messages import (
    ClientFirstMessage,
    ScramMessageError,
    format_client_final,
    format_client_first,
    format_server_final,
    format_server_first,
    parse_client_final,
    parse_client_first,
    parse_server_final,
    parse_server_first,
)

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "ScramClient",
    "ScramClientState",
    "ScramCredential",
    "ScramMechanism",
    "ScramServer",
    "ScramServerState",
    "credential_from_salted_password",
    "fake_credential",
    "make_credential",
    "password_matches",
    "salted_password",
]

MIN_ITERATIONS: Final = 4096  # Kafka's ScramMechanism.minIterations, both hashes
MAX_ITERATIONS: Final = 16384  # Kafka's ScramMechanism.maxIterations (AlterUserScramCredentials)
DEFAULT_ITERATIONS: Final = 4096  # kafka-configs.sh and kafka-storage.sh --add-scram
SALT_BYTES: Final = 32
AUTHZID_MISMATCH: Final = (
    "Authentication failed: Client requested an authorization id that is different from username"
)
_FAKE_CREDENTIAL_SECRET: Final = secrets.token_bytes(32)


class ScramMechanism(IntEnum):
    """A SCRAM mechanism; the value is KIP-554's mechanism type (0 is UNKNOWN on the wire)."""

    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_mechanism_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)


@dataclass(frozen=True, repr=False)
class ScramCredential:
    """What the server stores for one user and mechanism; never the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations}, salt=<hidden>, keys=<hidden>)"


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.digest(key, message, mechanism.hash_name)


def _hash(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC, one block of the hash's size."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored form of a salted password (what AlterUserScramCredentials upserts carry)."""
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=_hash(mechanism, client_key),
        server_key=_hmac(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def make_credential(
    mechanism: ScramMechanism,
    password: str,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """A credential for `password` with a random salt (unless given)."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    salted = salted_password(mechanism, password, salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


def password_matches(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (PBKDF2 runs: milliseconds)."""
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    expected = credential_from_salted_password(
        mechanism, salted, credential.salt, credential.iterations
    )
    return hmac.compare_digest(expected.stored_key, credential.stored_key)


def fake_credential(mechanism: ScramMechanism, username: str) -> ScramCredential:
    """A credential no password matches, for a user that does not exist. Its salt depends only
    on the name (and a per-process secret), so repeated probes see a stable salt like a real
    user's; its keys are of the real sizes."""
    tag = f"{mechanism.mechanism_name}\x00{username}".encode()
    digest = hmac.digest(_FAKE_CREDENTIAL_SECRET, tag, "sha512")
    return ScramCredential(
        salt=digest[:SALT_BYTES],
        stored_key=_hash(mechanism, digest),
        server_key=_hmac(mechanism, digest, b"Server Key"),
        iterations=DEFAULT_ITERATIONS,
    )


def _new_nonce() -> str:
    return secrets.token_urlsafe(24)  # 32 characters of [A-Za-z0-9_-]: printable, no comma


class ScramServerState(Enum):
    EXPECTING_CLIENT_FIRST = "expecting client-first"
    EXPECTING_CLIENT_FINAL = "expecting client-final"
    COMPLETE = "complete"
    FAILED = "failed"


# The state after a successful step; a state missing here accepts no token.
_SERVER_NEXT: Final = MappingProxyType(
    {
        ScramServerState.EXPECTING_CLIENT_FIRST: ScramServerState.EXPECTING_CLIENT_FINAL,
        ScramServerState.EXPECTING_CLIENT_FINAL: ScramServerState.COMPLETE,
    }
)

CredentialLookup = Callable[[str], ScramCredential | None]


class ScramServer:
    """The server side of one SCRAM exchange. `lookup_credential(username)` returns the user's
    credential for this mechanism, or None for an unknown user."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup_credential: CredentialLookup,
        *,
        server_nonce: str | None = None,  # tests pass RFC 7677's; otherwise random
    ):
        self.mechanism = mechanism
        self._lookup = lookup_credential
        self._server_nonce = server_nonce or _new_nonce()
        self._state = ScramServerState.EXPECTING_CLIENT_FIRST
        self._client_first: ClientFirstMessage | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._user_known = False
        self._authorization_id: str | None = None

    @property
    def mechanism_name(self) -> str:
        return self.mechanism.mechanism_name

    @property
    def state(self) -> ScramServerState:
        return self._state

    @property
    def is_complete(self) -> bool:
        return self._state is ScramServerState.COMPLETE

    @property
    def authorization_id(self) -> str:
        return authorization_id_of(self._authorization_id)

    def step(self, response: bytes) -> bytes:
        """Consume one client token, return the server's. Raises `SaslAuthenticationError`."""
        state = self._state
        try:
            if state is ScramServerState.EXPECTING_CLIENT_FIRST:
                answer = self._on_client_first(response)
            elif state is ScramServerState.EXPECTING_CLIENT_FINAL:
                answer = self._on_client_final(response)
            else:
                raise IllegalSaslStateError(f"Unexpected challenge in Sasl server state {state}")
        except Exception:
            self._fail()
            raise
        self._state = _SERVER_NEXT[state]
        return answer

    def _fail(self) -> None:
        self._state = ScramServerState.FAILED
        self._authorization_id = None
        self._credential = None
        self._client_first = None

    def _failure(self, reason: str) -> SaslAuthenticationError:
        return generic_failure(self.mechanism_name, reason)

    def _on_client_first(self, response: bytes) -> bytes:
        try:
            first = parse_client_first(response)
        except ScramMessageError as exc:
            raise self._failure(str(exc)) from None
        if first.authorization_id and first.authorization_id != first.username:
            raise SaslAuthenticationError(AUTHZID_MISMATCH)
        if first.extensions.get("tokenauth", "").lower() == "true":
            raise self._failure("delegation tokens (tokenauth) are not supported")
        try:
            credential = self._lookup(first.username)
        except Exception as exc:  # the store's failure must not become a different answer
            raise self._failure(f"credentials could not be obtained: {exc!r}") from None
        self._user_known = credential is not None
        if credential is None:
            credential = fake_credential(self.mechanism, first.username)
        if credential.iterations < MIN_ITERATIONS:
            raise self._failure(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS}"
            )
        self._client_first = first
        self._credential = credential
        nonce = first.nonce + self._server_nonce
        self._server_first = format_server_first(nonce, credential.salt, credential.iterations)
        return self._server_first.encode("ascii")

    def _on_client_final(self, response: bytes) -> bytes:
        first, credential = self._client_first, self._credential
        if first is None or credential is None:  # unreachable through step()
            raise IllegalSaslStateError("no client-first message")
        try:
            final = parse_client_final(response)
        except ScramMessageError as exc:
            raise self._failure(str(exc)) from None
        if final.channel_binding != first.gs2_header.encode("utf-8"):
            raise self._failure("channel binding does not repeat the gs2 header")
        # Kafka's ScramSaslServer checks only that the nonce ends with the server-first's
        # (client + server) nonce; librdkafka before 2.1 repeats the client nonce in front of
        # it, and Kafka accepts that. The proof still covers the message as sent.
        if not final.nonce.endswith(first.nonce + self._server_nonce):
            raise self._failure("Invalid client nonce in the final client message.")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        client_signature = _hmac(self.mechanism, credential.stored_key, auth_message)
        if len(final.proof) != len(client_signature):
            raise self._failure("client proof has the wrong length")
        client_key = _xor(final.proof, client_signature)
        proof_ok = hmac.compare_digest(_hash(self.mechanism, client_key), credential.stored_key)
        if not (proof_ok and self._user_known):
            reason = "Invalid client credentials" if self._user_known else "unknown user"
            raise self._failure(f"{reason}: {first.username!r}")
        signature = _hmac(self.mechanism, credential.server_key, auth_message)
        self._authorization_id = first.username
        self._credential = None
        return format_server_final(signature).encode("ascii")


class ScramClientState(Enum):
    INITIAL = "initial"
    EXPECTING_SERVER_FIRST = "expecting server-first"
    EXPECTING_SERVER_FINAL = "expecting server-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramClient:
    """The client side of one SCRAM exchange: `first_message()`, then
    `handle_server_first(token)` (returns the client-final), then `verify_server_final(token)`.
    Each raises `SaslAuthenticationError` on a bad server token, `IllegalSaslStateError` when
    called out of order."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        *,
        authorization_id: str = "",
        client_nonce: str | None = None,  # tests pass RFC 7677's; otherwise random
    ):
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._authorization_id = authorization_id
        self._nonce = client_nonce or _new_nonce()
        self._state = ScramClientState.INITIAL
        self._gs2_header = ""
        self._first_bare = ""
        self._server_signature = b""

    @property
    def state(self) -> ScramClientState:
        return self._state

    def _expect(self, state: ScramClientState) -> None:
        if self._state is not state:
            raise IllegalSaslStateError(f"SCRAM client is {self._state.value}, not {state.value}")

    def _fail(self, reason: str) -> SaslAuthenticationError:
        self._state = ScramClientState.FAILED
        return SaslAuthenticationError(f"SCRAM authentication failed: {reason}")

    def first_message(self) -> bytes:
        self._expect(ScramClientState.INITIAL)
        self._gs2_header, self._first_bare = format_client_first(
            self.username, self._nonce, self._authorization_id
        )
        self._state = ScramClientState.EXPECTING_SERVER_FIRST
        return (self._gs2_header + self._first_bare).encode("utf-8")

    def handle_server_first(self, challenge: bytes) -> bytes:
        self._expect(ScramClientState.EXPECTING_SERVER_FIRST)
        try:
            server_first = parse_server_first(challenge)
        except ScramMessageError as exc:
            raise self._fail(str(exc)) from None
        if not server_first.nonce.startswith(self._nonce) or server_first.nonce == self._nonce:
            raise self._fail("the server nonce does not extend the client nonce")
        if server_first.iterations < MIN_ITERATIONS:
            raise self._fail(
                f"Requested iterations {server_first.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self.mechanism.mechanism_name}"
            )
        salted = salted_password(
            self.mechanism, self._password, server_first.salt, server_first.iterations
        )
        without_proof = format_client_final(self._gs2_header, server_first.nonce)
        auth_message = f"{self._first_bare},{server_first.text},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        stored_key = _hash(self.mechanism, client_key)
        proof = _xor(client_key, _hmac(self.mechanism, stored_key, auth_message))
        server_key = _hmac(self.mechanism, salted, b"Server Key")
        self._server_signature = _hmac(self.mechanism, server_key, auth_message)
        self._state = ScramClientState.EXPECTING_SERVER_FINAL
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode()

    def verify_server_final(self, challenge: bytes) -> None:
        self._expect(ScramClientState.EXPECTING_SERVER_FINAL)
        try:
            server_final = parse_server_final(challenge)
        except ScramMessageError as exc:
            raise self._fail(str(exc)) from None
        if server_final.server_signature is None:
            raise self._fail(f"the server sent error {server_final.error!r}")
        if not hmac.compare_digest(server_final.server_signature, self._server_signature):
            raise self._fail("invalid server signature in the server final message")
        self._state = ScramClientState.COMPLETE
