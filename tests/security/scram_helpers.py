"""Helpers for the SCRAM tests: a one-user credential lookup and a full exchange."""

from __future__ import annotations

import base64
import hashlib
import hmac

from onceflow.security.scram import (
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    make_credential,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def users(mechanism: ScramMechanism, **passwords: str) -> dict[str, ScramCredential]:
    return {name: make_credential(mechanism, password) for name, password in passwords.items()}


def server_for(mechanism: ScramMechanism, credentials: dict[str, ScramCredential]) -> ScramServer:
    return ScramServer(mechanism, credentials.get)


def exchange(server: ScramServer, client: ScramClient) -> None:
    """Run a whole exchange; raises what the server or the client raises."""
    server_first = server.step(client.first_message())
    server_final = server.step(client.handle_server_first(server_first))
    client.verify_server_final(server_final)


def client_final_over(
    mechanism: ScramMechanism, password: str, first_bare: str, server_first: bytes, without: str
) -> bytes:
    """A client-final with a correct proof over whatever `without` (the client-final without
    proof) says: computed here with hashlib/hmac, independently of onceflow.security.scram."""
    fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(
        mechanism.hash_name, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    auth_message = f"{first_bare},{server_first.decode()},{without}".encode()
    signature = hmac.digest(stored_key, auth_message, mechanism.hash_name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without},p={base64.b64encode(proof).decode()}".encode()
