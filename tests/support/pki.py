"""Test certificates made with the `openssl` command at run time: a CA, a server certificate
for 127.0.0.1 and localhost, a client certificate signed by the CA, and a client certificate
signed by a second, untrusted CA. Everything is PEM; keys are unencrypted except
`server_encrypted.key` (password `keypass`)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL = shutil.which("openssl")
CLIENT_SUBJECT = "/C=US/O=onceflow/OU=test/CN=client"
CLIENT_DN = "CN=client,OU=test,O=onceflow,C=US"  # RFC 2253 (Java's X500Principal.getName())
KEY_PASSWORD = "keypass"


@dataclass(frozen=True)
class Pki:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)

    @property
    def ca(self) -> str:
        return self.path("ca.crt")

    @property
    def server_keystore(self) -> str:
        """One PEM file with the server's certificate and key (`ssl.keystore.location`)."""
        return self.path("server.pem")


def _run(*args: str, cwd: Path) -> None:
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


_NEW_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")


def _ca(cwd: Path, name: str) -> None:
    _run("req", "-x509", *_NEW_KEY, "-keyout", f"{name}.key", "-out", f"{name}.crt",
         "-days", "2", "-subj", f"/CN={name}", cwd=cwd)  # fmt: skip


def _signed(cwd: Path, name: str, ca: str, subject: str, extensions: str) -> None:
    (cwd / f"{name}.ext").write_text(extensions)
    _run("req", *_NEW_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
         cwd=cwd)  # fmt: skip
    _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext",
         cwd=cwd)  # fmt: skip


def make_pki(directory: Path) -> Pki:
    """Create the certificates in `directory` (needs `openssl` on PATH)."""
    if OPENSSL is None:
        raise RuntimeError("openssl is not installed")
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _signed(directory, "server", "ca", "/CN=localhost",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")  # fmt: skip
    _signed(directory, "client", "ca", CLIENT_SUBJECT, "extendedKeyUsage=clientAuth\n")
    _signed(directory, "rogue", "other-ca", "/CN=rogue", "extendedKeyUsage=clientAuth\n")
    server = (directory / "server.crt").read_text() + (directory / "server.key").read_text()
    (directory / "server.pem").write_text(server)
    _run("pkey", "-in", "server.key", "-aes256", "-passout", f"pass:{KEY_PASSWORD}", "-out",
         "server_encrypted.key", cwd=directory)  # fmt: skip
    return Pki(directory)


def server_keystore_for(pki: Pki, name: str, san: str) -> str:
    """A server certificate and key (one PEM file) signed by the PKI's CA for `/CN=name` with
    the subjectAltName `san` (e.g. `DNS:other.example`); made on first use."""
    keystore = pki.directory / f"{name}.pem"
    if not keystore.exists():
        _signed(pki.directory, name, "ca", f"/CN={name}",
                f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")  # fmt: skip
        text = (pki.directory / f"{name}.crt").read_text()
        keystore.write_text(text + (pki.directory / f"{name}.key").read_text())
    return str(keystore)


def tls_broker_config(pki: Pki, client_auth: str = "requested") -> dict[str, str]:
    """Broker configs for TLS listeners with this PKI."""
    return {
        "ssl.keystore.location": pki.server_keystore,
        "ssl.truststore.location": pki.ca,
        "ssl.client.auth": client_auth,
    }
