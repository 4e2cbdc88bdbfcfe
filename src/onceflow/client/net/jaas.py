"""`sasl.jaas.config`, the Java clients' login setting, read into the settings onceflow's client
takes (librdkafka's names), so a Java client's configuration works unchanged:

    org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";
    org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";
    org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
        clientId="svc" clientSecret="..." scope="kafka" extension_traceId="42";

The syntax is JAAS's: one login module (a class name, a control flag and `name=value` options,
values quoted with `"` or bare, ending in `;`). PLAIN and SCRAM give `sasl.username` and
`sasl.password`. OAuthBearerLoginModule with `clientId` gives OIDC client credentials (the
options Kafka's `OAuthBearerLoginCallbackHandler` reads; the token endpoint stays
`sasl.oauthbearer.token.endpoint.url`); without it, Kafka's unsecured-token options
(`unsecuredLoginStringClaim_sub`, `unsecuredLoginListClaim_scope`,
`unsecuredLoginLifetimeSeconds`, `unsecuredLoginExtension_<name>`, the claim-name options) give
the unsecured token. The login module must fit `sasl.mechanism` (unset: it is chosen from the
module). A setting given both ways must agree. Anything else (GSSAPI's Krb5LoginModule, other
modules, unknown options) is a `ConfigException` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from onceflow.client.errors import ConfigException

__all__ = ["JaasLogin", "jaas_settings", "parse_jaas_config"]

_PACKAGE = "org.apache.kafka.common.security."
PLAIN_MODULE = _PACKAGE + "plain.PlainLoginModule"
SCRAM_MODULE = _PACKAGE + "scram.ScramLoginModule"
OAUTHBEARER_MODULE = _PACKAGE + "oauthbearer.OAuthBearerLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


class JaasLogin:
    """One login module of a JAAS configuration: its class, control flag and options."""

    def __init__(self, module: str, flag: str, options: dict[str, str]):
        self.module = module
        self.flag = flag
        self.options = options

    def __repr__(self) -> str:  # options hold passwords
        return f"JaasLogin({self.module}, {self.flag}, options={sorted(self.options)})"


def _error(reason: str) -> ConfigException:
    return ConfigException(f"Invalid value (hidden) for configuration sasl.jaas.config: {reason}")


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: 'word', 'quoted', '=', ';'."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while text[position:].strip():
        match = _TOKEN.match(text, position)
        if match is None:
            raise _error(f"unexpected text at character {position}")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append(("quoted", _ESCAPE.sub(r"\1", quoted)))
        elif word is not None:
            tokens.append(("word", word))
        else:
            tokens.append((equals or semicolon, equals or semicolon))
        position = match.end()
    return tokens


def parse_jaas_config(text: str) -> JaasLogin:
    """The one login module of a `sasl.jaas.config` value; raises ConfigException."""
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise _error("expected '<LoginModule class> <flag> [name=value ...];'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in FLAGS:
        raise _error(f"control flag {tokens[1][1]!r} is not one of {', '.join(FLAGS)}")
    options: dict[str, str] = {}
    rest = tokens[2:]
    while rest and rest[0][0] != ";":
        if len(rest) < 3 or rest[0][0] != "word" or rest[1][0] != "=" or rest[2][0] == ";":
            raise _error('options must be name=value or name="value"')
        options[rest[0][1]] = rest[2][1]
        rest = rest[3:]
    if not rest:
        raise _error("the login module must end with ';'")
    if rest[1:]:
        raise _error("a client takes exactly one login module")
    return JaasLogin(module, flag, options)


def jaas_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with the settings its `sasl.jaas.config` implies added; raises
    ConfigException for a module or option onceflow cannot honour or a conflicting setting."""
    text = config.get("sasl.jaas.config")
    if text is None or not str(text).strip():
        return dict(config)
    login = parse_jaas_config(str(text))
    mechanism = str(config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "").upper()
    if login.module in (PLAIN_MODULE, SCRAM_MODULE):
        derived = _password_login(login, mechanism)
    elif login.module == OAUTHBEARER_MODULE:
        derived = _oauthbearer_login(login, mechanism)
    else:
        raise _error(
            f"login module {login.module} is not supported (PlainLoginModule, "
            "ScramLoginModule and OAuthBearerLoginModule are)"
        )
    merged = dict(config)
    for name, value in derived.items():
        if name == "sasl.mechanism" and mechanism:
            continue  # given, and the module fits it
        given = config.get(name)
        if given is not None and str(given).lower() != str(value).lower():
            raise ConfigException(f"{name} and sasl.jaas.config disagree; set it in one place")
        merged[name] = value
    return merged


def _password_login(login: JaasLogin, mechanism: str) -> dict[str, Any]:
    plain = login.module == PLAIN_MODULE
    if mechanism and (mechanism == "PLAIN") != plain or mechanism == "OAUTHBEARER":
        raise _error(f"{login.module} does not fit sasl.mechanism {mechanism}")
    unknown = set(login.options) - {"username", "password"}
    if unknown:
        raise _error(f"unknown option(s) {sorted(unknown)} of {login.module}")
    if "username" not in login.options or "password" not in login.options:
        raise _error(f"{login.module} needs username and password")
    settings: dict[str, Any] = {
        "sasl.username": login.options["username"],
        "sasl.password": login.options["password"],
    }
    if not mechanism:  # Kafka needs the mechanism; SCRAM's variant cannot be guessed
        if not plain:
            raise ConfigException("ScramLoginModule needs sasl.mechanism SCRAM-SHA-256 or -512")
        settings["sasl.mechanism"] = "PLAIN"
    return settings


_OIDC_OPTIONS = {
    "clientId": "sasl.oauthbearer.client.id",
    "clientSecret": "sasl.oauthbearer.client.secret",
    "scope": "sasl.oauthbearer.scope",
}


def _oauthbearer_login(login: JaasLogin, mechanism: str) -> dict[str, Any]:
    if mechanism and mechanism != "OAUTHBEARER":
        raise _error(f"{login.module} does not fit sasl.mechanism {mechanism}")
    options = login.options
    settings: dict[str, Any] = {"sasl.mechanism": "OAUTHBEARER"}
    if "clientId" in options:
        extensions = {
            k[len("extension_") :]: v for k, v in options.items() if k.startswith("extension_")
        }
        unknown = set(options) - set(_OIDC_OPTIONS) - {f"extension_{k}" for k in extensions}
        if unknown:
            raise _error(f"unknown option(s) {sorted(unknown)} of {login.module}")
        settings["sasl.oauthbearer.method"] = "oidc"
        settings |= {_OIDC_OPTIONS[k]: v for k, v in options.items() if k in _OIDC_OPTIONS}
        if extensions:
            settings["sasl.oauthbearer.extensions"] = ",".join(
                f"{k}={v}" for k, v in extensions.items()
            )
        return settings
    settings["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    settings["sasl.oauthbearer.config"] = _unsecured_config(login)
    return settings


def _unsecured_config(login: JaasLogin) -> str:
    """librdkafka's `sasl.oauthbearer.config` for Kafka's unsecured-login options."""
    options = dict(login.options)
    principal_claim = options.pop("unsecuredLoginPrincipalClaimName", "sub")
    scope_claim = options.pop("unsecuredLoginScopeClaimName", "scope")
    parts = []
    principal = options.pop(f"unsecuredLoginStringClaim_{principal_claim}", None)
    if not principal:
        raise _error(f"OAuthBearerLoginModule needs unsecuredLoginStringClaim_{principal_claim}")
    parts.append(f"principal={principal}")
    if principal_claim != "sub":
        parts.append(f"principalClaimName={principal_claim}")
    scope = options.pop(f"unsecuredLoginListClaim_{scope_claim}", None)
    if scope:  # Kafka: the first character is the separator
        items = [s for s in scope[1:].split(scope[0]) if s]
        parts.append(f"scope={','.join(items)}")
        if scope_claim != "scope":
            parts.append(f"scopeClaimName={scope_claim}")
    lifetime = options.pop("unsecuredLoginLifetimeSeconds", None)
    if lifetime is not None:
        parts.append(f"lifeSeconds={lifetime}")
    for name in [k for k in options if k.startswith("unsecuredLoginExtension_")]:
        parts.append(f"extension_{name[len('unsecuredLoginExtension_') :]}={options.pop(name)}")
    if options:
        raise _error(f"unsupported option(s) {sorted(options)} of {login.module}")
    if any(" " in part for part in parts):
        raise _error("unsecured-login option values must not contain spaces")
    return " ".join(parts)
