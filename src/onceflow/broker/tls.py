"""TLS for SSL and SASL_SSL listeners: the server's `ssl.SSLContext` from Kafka's PEM-style keys,
and the principal of a client certificate.

Keys (Kafka's names; only `ssl.keystore.type=PEM` and `ssl.truststore.type=PEM`):

- the server's certificate chain and key: `ssl.keystore.location` (one PEM file holding the
  chain and the key), or `ssl.keystore.certificate.chain` and `ssl.keystore.key` (PEM text);
  `ssl.key.password` decrypts an encrypted key;
- the CAs trusted for client certificates: `ssl.truststore.location` (PEM file) or
  `ssl.truststore.certificates` (PEM text);
- `ssl.client.auth`: `none` (no certificate asked for), `requested` (verified when sent),
  `required` (the handshake fails without one);
- `ssl.enabled.protocols`: TLSv1.2 and/or TLSv1.3; older protocols are never enabled.

A client certificate's principal is `User:` plus its subject as RFC 2253 text (Java's
`X500Principal.getName()`: the most specific RDN first, `CN=client,OU=eng,O=acme,C=US`), mapped
by `ssl.principal.mapping.rules` as Kafka's `SslPrincipalMapper`: a comma-separated list of
`RULE:pattern/replacement/[LU]` and `DEFAULT`; the first rule whose pattern matches the whole
subject gives the name (`$1` in the replacement is a group; `L`/`U` lower/upper-cases it),
`DEFAULT` gives the subject unchanged. No matching rule fails the connection, as in Kafka.
Without a verified certificate the principal is `User:ANONYMOUS`.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from onceflow.broker.config import BrokerConfig, ConfigError

__all__ = [
    "NoMatchingRuleError",
    "PrincipalMapper",
    "server_context",
    "subject_dn",
]

_TLS_VERSIONS: Final = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY_MODES: Final = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}

# OpenSSL's long attribute names (as `getpeercert()` gives them) -> RFC 2253 keywords; Java
# writes other attributes by OID, as does this module.
_KEYWORDS: Final = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_OIDS: Final = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5"}


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and len(escaped) > 1:
        escaped = escaped[:-1] + "\\ "
    return escaped


def subject_dn(certificate: dict[str, Any]) -> str:
    """The subject of a `SSLObject.getpeercert()` dict as RFC 2253 text."""
    rdns = []
    for rdn in reversed(certificate.get("subject", ())):
        parts = [
            f"{_KEYWORDS.get(name) or _OIDS.get(name, name)}={_escape(value)}"
            for name, value in rdn
        ]
        rdns.append("+".join(parts))
    return ",".join(rdns)


class NoMatchingRuleError(Exception):
    """No `ssl.principal.mapping.rules` rule applies to a certificate's subject."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """Kafka's `SslPrincipalMapper`: subject DN -> user name."""

    def __init__(self, rules: str = "DEFAULT"):
        self.rules_text = rules
        self._rules = self._parse(rules)

    @staticmethod
    def _parse(text: str) -> Sequence[_Rule]:
        rules: list[_Rule] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            match = _RULE.match(text, pos)
            if match is None or match.end() == pos:
                raise ConfigError(f"ssl.principal.mapping.rules: bad rule at {text[pos:]!r}")
            pos = match.end()
            if match.group(1):
                rules.append(_Rule(None))
                continue
            try:
                pattern = re.compile(match.group(2).replace("\\/", "/"))
            except re.error as exc:
                raise ConfigError(f"ssl.principal.mapping.rules: bad pattern: {exc}") from None
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3).replace("\\/", "/"))
            rules.append(_Rule(pattern, replacement, match.group(4)))
        return rules or [_Rule(None)]

    def name(self, distinguished_name: str) -> str:
        for rule in self._rules:
            if rule.pattern is None:
                return distinguished_name
            if rule.pattern.fullmatch(distinguished_name):
                name = rule.pattern.sub(rule.replacement, distinguished_name)
                if rule.case == "L":
                    return name.lower()
                return name.upper() if rule.case == "U" else name
        raise NoMatchingRuleError(
            f"No rules apply to {distinguished_name}, rules {self.rules_text}"
        )


def _protocol_range(config: BrokerConfig) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    names = [p.strip().upper() for p in config.get("ssl.enabled.protocols").split(",")]
    names = [name for name in names if name]
    if not names or any(name not in _TLS_VERSIONS for name in names):
        raise ConfigError(
            "ssl.enabled.protocols: only TLSv1.2 and TLSv1.3 are supported, got "
            f"{config.get('ssl.enabled.protocols')!r}"
        )
    versions = [_TLS_VERSIONS[name] for name in names]
    return min(versions), max(versions)


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig) -> None:
    location = config.get("ssl.keystore.location")
    chain = config.get("ssl.keystore.certificate.chain")
    key = config.get("ssl.keystore.key")
    password = config.get("ssl.key.password")
    if location and (chain or key):
        raise ConfigError(
            "ssl.keystore.location cannot be combined with ssl.keystore.certificate.chain/key"
        )
    try:
        if location:
            context.load_cert_chain(location, password=password)
            return
        if not (chain and key):
            raise ConfigError(
                "a TLS listener needs ssl.keystore.location, or ssl.keystore.certificate.chain "
                "and ssl.keystore.key"
            )
        with tempfile.TemporaryDirectory(prefix="onceflow-tls-") as directory:
            path = os.path.join(directory, "keystore.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(f"{chain.strip()}\n{key.strip()}\n")
            context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS keystore: {exc}") from None


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig) -> bool:
    location = config.get("ssl.truststore.location")
    certificates = config.get("ssl.truststore.certificates")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        if certificates:
            context.load_verify_locations(cadata=certificates)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS truststore: {exc}") from None
    return bool(location or certificates)


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    """The server-side context of every TLS listener; raises ConfigError naming the key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = _protocol_range(config)
    _load_keystore(context, config)
    has_truststore = _load_truststore(context, config)
    client_auth = config.get("ssl.client.auth")
    if client_auth != "none" and not has_truststore:
        raise ConfigError(
            f"ssl.client.auth={client_auth} needs ssl.truststore.location or "
            "ssl.truststore.certificates"
        )
    context.verify_mode = _VERIFY_MODES[client_auth]
    return context
