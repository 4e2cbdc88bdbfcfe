"""How a client reaches a secured broker: confluent-kafka's (librdkafka's) property names turned
into a TLS context and a SASL mechanism, checked once when the client is built.

    security.protocol                      plaintext | ssl | sasl_plaintext | sasl_ssl
    sasl.mechanism (alias sasl.mechanisms) PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 | OAUTHBEARER
    sasl.username, sasl.password           the SASL credentials (PLAIN, SCRAM)
    sasl.jaas.config                       Kafka's JAAS line instead (`client.net.jaas`)
    oauth_cb, sasl.oauthbearer.method,     OAUTHBEARER's token provider: a callback, OIDC
    sasl.oauthbearer.*                     client credentials or the unsecured token
                                           (`client.net.oauthbearer`)
    ssl.ca.location                        CA file (PEM) that signs the broker's certificate;
                                           unset: the system's default CAs
    ssl.certificate.location, ssl.key.location, ssl.key.password
                                           the client's certificate and key (mutual TLS)
    ssl.truststore.location, .type, .password
                                           instead of ssl.ca.location: a PKCS12 (default), JKS
                                           or PEM trust store (`client.net.keystores`)
    ssl.keystore.location, .type, .password (and ssl.key.password)
                                           instead of the certificate and key files: the
                                           client's key store, PKCS12, JKS or PEM
    ssl.endpoint.identification.algorithm  https (default, as librdkafka >= 2.0): the broker's
                                           certificate must name the host connected to; none
    enable.ssl.certificate.verification    true (default); false accepts any certificate

TLS is 1.2 or later. A bad value raises `ConfigException` naming the property; passwords never
appear in messages or reprs. A TLS failure before the connection is through its Kafka handshake
(an untrusted or misnamed broker certificate, a refused client certificate, no shared protocol)
is `SslAuthenticationError` (`ssl_authentication_error`), an authentication failure raised by
the clients' next call, as librdkafka and Kafka's Java client do; an EOF or reset stays a
transport failure (the broker may come back). Settings for a protocol not in use are ignored,
as Kafka does. `sasl.mechanism` defaults to GSSAPI as in Kafka, which onceflow does not speak:
SASL needs it set.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from onceflow.client.errors import ConfigException, SslAuthenticationError
from onceflow.client.net.jaas import jaas_settings
from onceflow.client.net.keystores import STORE_TYPES, load_keystore, load_truststore
from onceflow.client.net.oauthbearer import (
    CallbackTokenProvider,
    OAuthBearerClient,
    OidcTokenProvider,
    RefreshingToken,
    TokenProvider,
    UnsecuredTokenProvider,
    oauth_callback,
    parse_extensions,
)
from onceflow.client.net.sasl import SASL_MECHANISMS, SaslClient, sasl_client

__all__ = [
    "SECRET_KEYS",
    "SECURITY_CONFIG_NAMES",
    "SECURITY_PROTOCOLS",
    "ClientSecurity",
    "client_security",
    "ssl_authentication_error",
]

SECURITY_PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
ENDPOINT_ALGORITHMS = ("https", "none")
OAUTHBEARER = "OAUTHBEARER"
MECHANISMS = (*SASL_MECHANISMS, OAUTHBEARER)
SECRET_KEYS = frozenset(
    {
        "sasl.password",
        "ssl.key.password",
        "sasl.oauthbearer.client.secret",
        "sasl.jaas.config",
        "ssl.keystore.password",
        "ssl.truststore.password",
    }
)
SECURITY_CONFIG_NAMES = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.password",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.password",
    "sasl.jaas.config",
    "oauth_cb",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
    "sasl.oauthbearer.extensions",
)


@dataclass(frozen=True, repr=False)
class ClientSecurity:
    """The security of one client's connections: a TLS context (None: plain TCP) and the SASL
    mechanism with its credentials (None: no SASL)."""

    protocol: str = "plaintext"
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    token: RefreshingToken | None = None  # OAUTHBEARER's

    def sasl(self) -> SaslClient | None:
        """A fresh SASL exchange for a new connection (None without SASL)."""
        if self.mechanism is None:
            return None
        if self.token is not None:
            return OAuthBearerClient(self.token)
        return sasl_client(self.mechanism, self.username or "", self.password or "")

    def __repr__(self) -> str:
        sasl = f", {self.mechanism}, username={self.username!r}" if self.mechanism else ""
        return f"ClientSecurity({self.protocol}{sasl})"


PLAINTEXT = ClientSecurity()


def _text(config: Mapping[str, Any], name: str) -> str | None:
    value = config.get(name)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _invalid(name: str, value: Any, reason: str) -> ConfigException:
    return ConfigException(f"Invalid value {value} for configuration {name}: {reason}")


def client_security(config: Mapping[str, Any]) -> ClientSecurity:
    """Check the security properties of a client configuration (values typed or strings)."""
    config = jaas_settings(config)
    protocol = (_text(config, "security.protocol") or "plaintext").lower()
    if protocol not in SECURITY_PROTOCOLS:
        raise _invalid(
            "security.protocol",
            config.get("security.protocol"),
            f"String must be one of: {', '.join(SECURITY_PROTOCOLS)}",
        )
    context = _ssl_context(config) if protocol.endswith("ssl") else None
    if not protocol.startswith("sasl"):
        return ClientSecurity(protocol, context)
    mechanism = _text(config, "sasl.mechanism") or _text(config, "sasl.mechanisms") or "GSSAPI"
    mechanism = mechanism.upper()
    if mechanism not in MECHANISMS:
        raise _invalid("sasl.mechanism", mechanism, f"onceflow supports {', '.join(MECHANISMS)}")
    if mechanism == OAUTHBEARER:
        token = RefreshingToken(_token_provider(config))
        return ClientSecurity(protocol, context, mechanism, token=token)
    username, password = _text(config, "sasl.username"), config.get("sasl.password")
    if username is None or password is None or str(password) == "":
        raise ConfigException(
            f"sasl.username and sasl.password are required for sasl.mechanism {mechanism}"
        )
    return ClientSecurity(protocol, context, mechanism, username, str(password))


def _token_provider(config: Mapping[str, Any]) -> TokenProvider:
    """OAUTHBEARER's token provider: `oauth_cb`, OIDC or the unsecured token, in that order."""
    try:
        extensions = parse_extensions(_text(config, "sasl.oauthbearer.extensions"))
    except ValueError as exc:
        raise _invalid("sasl.oauthbearer.extensions", "(hidden)", str(exc)) from None
    callback = config.get("oauth_cb")
    if isinstance(callback, str):
        try:
            callback = oauth_callback(callback)
        except (ImportError, AttributeError, ValueError) as exc:
            raise _invalid("oauth_cb", config.get("oauth_cb"), str(exc)) from None
    if callback is not None:
        if not callable(callback):
            raise _invalid("oauth_cb", callback, "expected a callable or 'module:function'")
        return CallbackTokenProvider(callback, _text(config, "sasl.oauthbearer.config") or "")
    method = (_text(config, "sasl.oauthbearer.method") or "default").lower()
    if method not in ("default", "oidc"):
        raise _invalid("sasl.oauthbearer.method", method, "String must be one of: default, oidc")
    if method == "oidc":
        required = (
            "sasl.oauthbearer.token.endpoint.url",
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.client.secret",
        )
        values = [_text(config, name) for name in required]
        missing = [name for name, value in zip(required, values, strict=True) if value is None]
        if missing:
            raise ConfigException(f"sasl.oauthbearer.method=oidc requires {', '.join(missing)}")
        url, client_id, secret = (str(v) for v in values)
        scope = _text(config, "sasl.oauthbearer.scope")
        return OidcTokenProvider(url, client_id, secret, scope, extensions)
    if not _flag(config, "enable.sasl.oauthbearer.unsecure.jwt", False):
        raise ConfigException(
            "sasl.mechanism OAUTHBEARER needs a token provider: oauth_cb, "
            "sasl.oauthbearer.method=oidc with its endpoint and client credentials, or "
            "enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config "
            "(unsecured tokens, for tests only)"
        )
    try:
        provider = UnsecuredTokenProvider(_text(config, "sasl.oauthbearer.config") or "")
    except ValueError as exc:
        raise _invalid("sasl.oauthbearer.config", "(hidden)", str(exc)) from None
    provider.extensions.update(extensions)
    return provider


def _secret(config: Mapping[str, Any], name: str) -> str | None:
    value = config.get(name)
    return None if value is None else str(value)


def _store_type(config: Mapping[str, Any], name: str) -> str:
    store_type = (_text(config, name) or "PKCS12").upper()
    if store_type not in STORE_TYPES:
        raise _invalid(name, store_type, f"String must be one of: {', '.join(STORE_TYPES)}")
    return store_type


def _flag(config: Mapping[str, Any], name: str, default: bool) -> bool:
    value = config.get(name)
    if value is None or isinstance(value, bool):
        return default if value is None else value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise _invalid(name, value, "Expected value to be either true or false")
    return text == "true"


def _ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    algorithm = (_text(config, "ssl.endpoint.identification.algorithm") or "https").lower()
    if algorithm not in ENDPOINT_ALGORITHMS:
        raise _invalid(
            "ssl.endpoint.identification.algorithm", algorithm, "String must be one of: https, none"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    verify = _flag(config, "enable.ssl.certificate.verification", True)
    context.check_hostname = verify and algorithm == "https"
    if not verify:
        context.verify_mode = ssl.CERT_NONE
    ca = _text(config, "ssl.ca.location")
    truststore = _text(config, "ssl.truststore.location")
    if ca is not None and truststore is not None:
        raise ConfigException("set ssl.ca.location or ssl.truststore.location, not both")
    try:
        if truststore is not None:
            load_truststore(
                context,
                truststore,
                _store_type(config, "ssl.truststore.type"),
                _secret(config, "ssl.truststore.password"),
            )
        elif ca is not None:
            context.load_verify_locations(cafile=ca)
        else:
            context.load_default_certs()
    except (OSError, ssl.SSLError, ValueError) as exc:
        name, value = (
            ("ssl.ca.location", ca)
            if truststore is None
            else ("ssl.truststore.location", truststore)
        )
        raise _invalid(name, value, f"cannot load the CA certificates: {exc}") from None
    certificate, key = _text(config, "ssl.certificate.location"), _text(config, "ssl.key.location")
    keystore = _text(config, "ssl.keystore.location")
    if keystore is not None:
        if certificate is not None or key is not None:
            raise ConfigException(
                "set ssl.keystore.location or ssl.certificate.location/ssl.key.location, not both"
            )
        try:
            load_keystore(
                context,
                keystore,
                _store_type(config, "ssl.keystore.type"),
                _secret(config, "ssl.keystore.password"),
                _secret(config, "ssl.key.password"),
            )
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise _invalid(
                "ssl.keystore.location", keystore, f"cannot load the key store: {exc}"
            ) from None
        return context
    if (certificate is None) != (key is None):
        raise ConfigException(
            "ssl.certificate.location and ssl.key.location must be set together (mutual TLS)"
        )
    if certificate is not None:
        key_password = config.get("ssl.key.password")
        try:
            context.load_cert_chain(
                certificate, key, None if key_password is None else str(key_password)
            )
        except (OSError, ssl.SSLError) as exc:
            raise _invalid(
                "ssl.certificate.location",
                certificate,
                f"cannot load the certificate with ssl.key.location {key}: {exc}",
            ) from None
    return context


# OpenSSL's verify results that name the fix (X509_V_ERR_*)
_UNTRUSTED = frozenset({2, 18, 19, 20, 21})  # unknown issuer, self-signed, no local issuer...
_WRONG_NAME = frozenset({62, 64})  # hostname / IP address mismatch
_TRANSPORT_ONLY = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)


def ssl_authentication_error(
    exc: BaseException, host: str, port: int
) -> SslAuthenticationError | None:
    """The `SslAuthenticationError` a TLS failure while connecting to `host:port` means, with
    OpenSSL's reason and a hint at the setting to check; None for other failures (not TLS,
    or an EOF or reset, which are transport failures)."""
    if not isinstance(exc, ssl.SSLError) or isinstance(exc, _TRANSPORT_ONLY):
        return None
    reason = str(exc)
    code = getattr(exc, "verify_code", None)
    if code in _UNTRUSTED:
        reason += (
            "; the broker's certificate is not signed by a CA in ssl.ca.location (or the "
            "system's CAs when it is unset)"
        )
    elif code in _WRONG_NAME:
        reason += (
            f"; the broker's certificate does not name {host} (subjectAltName), which "
            "ssl.endpoint.identification.algorithm=https requires"
        )
    error = SslAuthenticationError(f"SSL handshake with {host}:{port} failed: {reason}")
    error.__cause__ = exc
    return error
