"""A reader of Java's JKS key store format (`keytool -storetype JKS`), enough for a client's TLS:
private key entries (key and certificate chain) and trusted certificate entries.

The layout (Sun's `JavaKeyStore`): magic 0xFEEDFEED, version 1 or 2, the entry count; per entry
a tag (1: private key, 2: trusted certificate), the alias (Java's modified UTF-8), a timestamp;
a private key entry holds its protected key (DER `EncryptedPrivateKeyInfo`) and its chain, a
trusted entry one certificate (v2 names each certificate's type). The store ends with
SHA-1(password as UTF-16BE || "Mighty Aphrodite" || everything before), which is checked.

A key is protected with Sun's `KeyProtector` (OID 1.3.6.1.4.1.42.2.17.1.1): 20 bytes of salt,
the key XORed with a SHA-1 keystream (d0 = salt, d(i+1) = SHA-1(password || d(i))), then
SHA-1(password || plain key) as a check. JCEKS (0xCECECECE, Triple-DES protected keys) is
refused with an error that says to convert the store to PKCS12.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass, field

__all__ = ["JksError", "JksStore", "read_jks"]

JKS_MAGIC = 0xFEEDFEED
JCEKS_MAGIC = 0xCECECECE
KEY_PROTECTOR_OID = bytes.fromhex("2b060104012a02110101")  # 1.3.6.1.4.1.42.2.17.1.1
PRIVATE_KEY_TAG, TRUSTED_CERT_TAG = 1, 2


class JksError(ValueError):
    """Not a JKS store, a wrong password, or a damaged store."""


@dataclass
class JksStore:
    """The DER contents of a store: alias -> (PKCS#8 key, chain) and alias -> certificate."""

    private_keys: dict[str, tuple[bytes, list[bytes]]] = field(default_factory=dict)
    certificates: dict[str, bytes] = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.position = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.position + size > len(self.data):
            raise JksError("the key store is truncated")
        chunk = self.data[self.position : self.position + size]
        self.position += size
        return chunk

    def int(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def utf(self) -> str:
        size = struct.unpack(">H", self.take(2))[0]
        return self.take(size).decode("utf-8", "replace")  # modified UTF-8 differs on NUL only

    def blob(self) -> bytes:
        return self.take(self.int())


def _password_bytes(password: str) -> bytes:
    return password.encode("utf-16-be")


def read_jks(
    data: bytes, store_password: str | None, key_password: str | None = None, open_keys: bool = True
) -> JksStore:
    """The entries of a JKS store; the store password checks its integrity (None: unchecked, as
    Java reads a trust store without a password), the key password (default: the store
    password, as keytool makes them) opens its keys unless `open_keys` is False (the keys stay
    protected). Raises JksError."""
    reader = _Reader(data)
    magic = struct.unpack(">I", reader.take(4))[0] if len(data) >= 4 else 0
    if magic == JCEKS_MAGIC:
        raise JksError("JCEKS stores are not supported; convert with keytool -importkeystore "
                       "-deststoretype PKCS12")  # fmt: skip
    if magic != JKS_MAGIC:
        raise JksError("not a JKS key store (bad magic number)")
    version = reader.int()
    if version not in (1, 2):
        raise JksError(f"unsupported JKS version {version}")
    store = JksStore()
    for _ in range(reader.int()):
        tag, alias = reader.int(), reader.utf()
        reader.take(8)  # the entry's timestamp
        if tag == PRIVATE_KEY_TAG:
            protected = reader.blob()
            chain = [_certificate(reader, version) for _ in range(reader.int())]
            store.private_keys[alias] = (protected, chain)
        elif tag == TRUSTED_CERT_TAG:
            store.certificates[alias] = _certificate(reader, version)
        else:
            raise JksError(f"unknown entry tag {tag} for alias {alias!r}")
    stored_digest = reader.take(20)
    if store_password is not None:
        digest = hashlib.sha1(_password_bytes(store_password) + b"Mighty Aphrodite")
        digest.update(data[: reader.position - 20])
        if not hmac.compare_digest(digest.digest(), stored_digest):
            raise JksError("the key store password is wrong or the store is damaged")
    password = store_password if key_password is None else key_password
    if not open_keys:
        return store
    if password is None:
        raise JksError("a key password is needed to open the private keys")
    for alias, (protected, chain) in store.private_keys.items():
        store.private_keys[alias] = (_unprotect(protected, password, alias), chain)
    return store


def _certificate(reader: _Reader, version: int) -> bytes:
    if version == 2:
        kind = reader.utf()
        if kind != "X.509":
            raise JksError(f"certificate type {kind} is not X.509")
    return reader.blob()


def _der(data: bytes, position: int) -> tuple[int, int, int]:
    """(tag, start of contents, end of contents) of the DER element at `position`."""
    if position + 2 > len(data):
        raise JksError("a protected key is truncated")
    tag, size = data[position], data[position + 1]
    position += 2
    if size & 0x80:
        count = size & 0x7F
        size = int.from_bytes(data[position : position + count], "big")
        position += count
    if position + size > len(data):
        raise JksError("a protected key is truncated")
    return tag, position, position + size


def _unprotect(protected: bytes, password: str, alias: str) -> bytes:
    """The PKCS#8 key inside Sun's KeyProtector `EncryptedPrivateKeyInfo`."""
    _, start, _ = _der(protected, 0)  # SEQUENCE
    _, algorithm_start, algorithm_end = _der(protected, start)  # AlgorithmIdentifier
    tag, oid_start, oid_end = _der(protected, algorithm_start)
    if tag != 0x06 or protected[oid_start:oid_end] != KEY_PROTECTOR_OID:
        raise JksError(f"the key of {alias!r} is not protected with Sun's JKS key protector")
    tag, data_start, data_end = _der(protected, algorithm_end)
    if tag != 0x04:
        raise JksError(f"the key of {alias!r} is not an OCTET STRING")
    encrypted = protected[data_start:data_end]
    if len(encrypted) < 40:
        raise JksError(f"the key of {alias!r} is truncated")
    salt, body, check = encrypted[:20], encrypted[20:-20], encrypted[-20:]
    secret = _password_bytes(password)
    stream, digest = bytearray(), salt
    while len(stream) < len(body):
        digest = hashlib.sha1(secret + digest).digest()
        stream += digest
    key = bytes(a ^ b for a, b in zip(body, stream, strict=False))
    if not hmac.compare_digest(hashlib.sha1(secret + key).digest(), check):
        raise JksError(f"the key password of {alias!r} is wrong (ssl.key.password)")
    return key
