"""The broker's CPU cost of one SASL login, by mechanism, in-process (no sockets): OAUTHBEARER
with an RS256 token checked against a JWKS file (the key set cached, as on a running broker),
OAUTHBEARER with an unsecured token, PLAIN and SCRAM-SHA-512 against a credential of 4096
iterations (PLAIN runs PBKDF2 on the broker; SCRAM's PBKDF2 is the client's, whose steps are
timed and subtracted). Each variant is timed in rounds, alternating the order, and the median
round is kept. Appends the run to bench/results/sasl_login_cost.json and prints one line.

    .venv/bin/python bench/sasl_login_cost.py
    .venv/bin/python bench/sasl_login_cost.py --logins 500 --rounds 7
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from broker_throughput import append_result, machine
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from onceflow.security.credentials import ScramCredentialStore
from onceflow.security.jwt import JwksValidator, UnsecuredValidator
from onceflow.security.oauthbearer import OAuthBearerServer
from onceflow.security.plain import PlainServer
from onceflow.security.scram import ScramClient, ScramMechanism, ScramServer, make_credential

RESULTS = Path(__file__).parent / "results" / "sasl_login_cost.json"
PASSWORD = "bench-secret"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def rs256_setup(directory: Path) -> tuple[str, str]:
    """(JWKS file URL, a token for `bench`) from a fresh 2048-bit RSA key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    numbers = key.public_key().public_numbers()
    n = numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")
    jwk = {"kty": "RSA", "kid": "k", "n": b64url(n), "e": b64url(b"\x01\x00\x01")}
    (directory / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    header = b64url(json.dumps({"alg": "RS256", "kid": "k"}).encode())
    claims = b64url(json.dumps({"sub": "bench", "exp": int(time.time()) + 3600}).encode())
    signature = key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return (directory / "jwks.json").as_uri(), f"{header}.{claims}.{b64url(signature)}"


def unsecured_token() -> str:
    header = json.dumps({"alg": "none"}).encode()
    claims = json.dumps({"sub": "bench", "exp": int(time.time()) + 3600}).encode()
    return f"{b64url(header)}.{b64url(claims)}."


def variants(directory: Path) -> dict[str, Callable[[], float]]:
    """name -> one login, returning the seconds spent on the client's side (not counted)."""
    url, signed = rs256_setup(directory)
    jwks = JwksValidator(url)
    unsecured = UnsecuredValidator()
    unsecured_response = f"n,,\x01auth=Bearer {unsecured_token()}\x01\x01".encode()
    signed_response = f"n,,\x01auth=Bearer {signed}\x01\x01".encode()
    store = ScramCredentialStore(str(directory))
    mechanism = ScramMechanism.SCRAM_SHA_512
    store.add_if_absent("bench", mechanism, make_credential(mechanism, PASSWORD, 4096))
    credential = store.credential("bench", mechanism)

    def oauthbearer(validator, response: bytes) -> Callable[[], float]:
        def login() -> float:
            server = OAuthBearerServer(validator)
            if server.step(response) != b"" or not server.is_complete:
                raise RuntimeError("login failed")
            return 0.0

        return login

    def plain() -> float:
        server = PlainServer(store.verify_password)
        server.step(f"\0bench\0{PASSWORD}".encode())
        return 0.0

    def scram() -> float:
        started = time.perf_counter()
        client = ScramClient(mechanism, "bench", PASSWORD)
        first_message = client.first_message()
        client_s = time.perf_counter() - started
        server = ScramServer(mechanism, lambda user: credential)
        first = server.step(first_message)
        started = time.perf_counter()
        final = client.handle_server_first(first)  # the client's PBKDF2
        client_s += time.perf_counter() - started
        server.step(final)
        if not server.is_complete:
            raise RuntimeError("login failed")
        return client_s

    jwks.validate(signed)  # load the key set once, as a running broker has it
    return {
        "oauthbearer_rs256": oauthbearer(jwks, signed_response),
        "oauthbearer_unsecured": oauthbearer(unsecured, unsecured_response),
        "plain": plain,
        "scram_sha_512": scram,
    }


def time_round(login: Callable[[], float], logins: int) -> float:
    """Seconds per login on the broker's side."""
    excluded = 0.0
    start = time.perf_counter()
    for _ in range(logins):
        excluded += login()
    return (time.perf_counter() - start - excluded) / logins


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logins", type=int, default=200, help="logins per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        logins = variants(Path(directory))
        rounds: dict[str, list[float]] = {name: [] for name in logins}
        names = list(logins)
        for i in range(args.rounds):
            for name in names if i % 2 == 0 else reversed(names):
                rounds[name].append(time_round(logins[name], args.logins))
    medians_us = {name: statistics.median(times) * 1e6 for name, times in rounds.items()}
    entry = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "config": {"logins": args.logins, "rounds": args.rounds, "scram_iterations": 4096},
        "results": {"median_us_per_login": medians_us},
    }
    append_result(args.out, entry)
    print(", ".join(f"{name} {us:.0f} us" for name, us in medians_us.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
