"""PKCS12 and JKS key and trust stores made with the JDK's `keytool` from the test PKI
(tests/support/pki.py): the client's key and chain, and the CA as a trust store. `openssl`
bundles the PEM key into a first PKCS12 file (keytool cannot import a PEM key); keytool then
writes every store the tests read."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from support.pki import OPENSSL, Pki

KEYTOOL = shutil.which("keytool")
STORE_PASSWORD = "store-pass"
KEY_PASSWORD = "key-pass"  # the JKS key store's key (PKCS12 keys take the store password)
TRUST_PASSWORD = "trust-pass"


@dataclass(frozen=True)
class JavaStores:
    client_p12: str
    client_jks: str
    trust_p12: str
    trust_jks: str


def _keytool(*args: str) -> None:
    subprocess.run([KEYTOOL, *args], check=True, capture_output=True, timeout=120)


def make_java_stores(pki: Pki) -> JavaStores:
    """The stores in `pki.directory` (made on first use); needs keytool and openssl."""
    if KEYTOOL is None or OPENSSL is None:
        raise RuntimeError("keytool (a JDK) and openssl are needed")
    d = pki.directory
    stores = JavaStores(
        *(str(d / n) for n in ("client.p12", "client.jks", "trust.p12", "trust.jks"))
    )
    if Path(stores.trust_jks).exists():
        return stores
    bundle = str(d / "client-openssl.p12")
    subprocess.run(
        [OPENSSL, "pkcs12", "-export", "-in", pki.path("client.crt"), "-inkey",
         pki.path("client.key"), "-certfile", pki.ca, "-name", "client", "-out", bundle,
         "-passout", f"pass:{STORE_PASSWORD}"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    source = ("-srckeystore", bundle, "-srcstoretype", "PKCS12", "-srcstorepass", STORE_PASSWORD)
    _keytool("-importkeystore", *source, "-destkeystore", stores.client_p12,
             "-deststoretype", "PKCS12", "-deststorepass", STORE_PASSWORD)  # fmt: skip
    _keytool("-importkeystore", *source, "-srcalias", "client", "-destalias", "client",
             "-destkeystore", stores.client_jks, "-deststoretype", "JKS",
             "-deststorepass", STORE_PASSWORD, "-destkeypass", KEY_PASSWORD)  # fmt: skip
    for path, store_type in ((stores.trust_p12, "PKCS12"), (stores.trust_jks, "JKS")):
        _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", pki.ca, "-keystore", path,
                 "-storetype", store_type, "-storepass", TRUST_PASSWORD)  # fmt: skip
    return stores
