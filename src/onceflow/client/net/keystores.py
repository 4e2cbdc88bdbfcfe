"""Java-style key and trust stores for a client's TLS context, with Kafka's property names:

    ssl.keystore.location, ssl.keystore.type, ssl.keystore.password, ssl.key.password
    ssl.truststore.location, ssl.truststore.type, ssl.truststore.password

Types (Kafka's, case-insensitive; default PKCS12 as in Kafka 3+): PKCS12 (read with
`cryptography`), JKS (`client.net.jks`) and PEM (key and chain in one file; a trust store of
certificates). A key store's key and chain go into the context through a private temporary
file (mode 0600 in a 0700 directory, removed as soon as OpenSSL has read it: Python's `ssl`
loads keys from files only); a trust store's certificates are loaded from memory. A key store
must hold exactly one key (Kafka would pick by alias; onceflow names the aliases instead). A
wrong password or an unreadable store is a `ValueError` the caller turns into a
ConfigException naming the property.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from onceflow.client.net.jks import JksError, read_jks

__all__ = ["STORE_TYPES", "load_keystore", "load_truststore"]

STORE_TYPES = ("PKCS12", "JKS", "PEM")


def _pem_certificate(der: bytes) -> bytes:
    return x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)


def _pkcs12_key_and_chain(data: bytes, password: str | None) -> tuple[bytes, list[bytes]]:
    secret = None if password is None else password.encode()
    key, certificate, extra = pkcs12.load_key_and_certificates(data, secret)
    if key is None or certificate is None:
        raise ValueError("the PKCS12 key store holds no private key with its certificate")
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    chain = [c.public_bytes(serialization.Encoding.PEM) for c in [certificate, *extra]]
    return pem_key, chain


def _jks_key_and_chain(
    data: bytes, password: str | None, key_password: str | None
) -> tuple[bytes, list[bytes]]:
    if password is None:
        raise ValueError("a JKS key store needs ssl.keystore.password")
    try:
        store = read_jks(data, password, key_password)
    except JksError as exc:
        raise ValueError(str(exc)) from None
    if len(store.private_keys) != 1:
        aliases = ", ".join(sorted(store.private_keys)) or "none"
        raise ValueError(
            f"the JKS key store must hold exactly one private key (aliases: {aliases})"
        )
    ((key_der, chain),) = store.private_keys.values()
    key = serialization.load_der_private_key(key_der, None)
    pem_key = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem_key, [_pem_certificate(der) for der in chain]


def load_keystore(
    context: ssl.SSLContext,
    location: str,
    store_type: str,
    password: str | None,
    key_password: str | None,
) -> None:
    """Load the client's key and certificate chain from a key store into `context`."""
    if store_type == "PEM":
        context.load_cert_chain(location, location, key_password or password)
        return
    data = Path(location).read_bytes()
    if store_type == "PKCS12":
        pem_key, chain = _pkcs12_key_and_chain(data, password)
    else:
        pem_key, chain = _jks_key_and_chain(data, password, key_password)
    with tempfile.TemporaryDirectory(prefix="onceflow-keystore-") as directory:
        path = os.path.join(directory, "client.pem")
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem_key + b"".join(chain))
        context.load_cert_chain(path)


def load_truststore(
    context: ssl.SSLContext, location: str, store_type: str, password: str | None
) -> int:
    """Trust the certificates of a trust store; returns how many it held (at least one)."""
    if store_type == "PEM":
        context.load_verify_locations(cafile=location)
        return len(context.get_ca_certs())
    data = Path(location).read_bytes()
    if store_type == "PKCS12":
        secret = None if password is None else password.encode()
        loaded = pkcs12.load_pkcs12(data, secret)
        certificates = [c.certificate for c in loaded.additional_certs]
        if loaded.cert is not None:
            certificates.append(loaded.cert.certificate)
        pem = [c.public_bytes(serialization.Encoding.PEM) for c in certificates]
    else:
        try:  # Kafka allows a JKS trust store without a password (no integrity check then)
            store = read_jks(data, password, open_keys=False)
        except JksError as exc:
            raise ValueError(str(exc)) from None
        pem = [_pem_certificate(der) for der in store.certificates.values()]
        pem += [_pem_certificate(chain[0]) for _, chain in store.private_keys.values() if chain]
    if not pem:
        raise ValueError("the trust store holds no certificates")
    context.load_verify_locations(cadata=b"".join(pem).decode("ascii"))
    return len(pem)
