"""`sasl.jaas.config` (client.net.jaas): Java's JAAS syntax read into the client's settings for
PLAIN, SCRAM and OAUTHBEARER (OIDC and unsecured options), and the errors for what onceflow
cannot honour. The end-to-end logins are in tests/security/test_oauthbearer_clients.py."""

from __future__ import annotations

import pytest

from onceflow.client.errors import ConfigException
from onceflow.client.net.jaas import jaas_settings, parse_jaas_config
from onceflow.client.net.security import client_security

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SASL = {"security.protocol": "SASL_PLAINTEXT"}


def test_syntax_quoted_bare_and_escaped_values():
    login = parse_jaas_config(f'{PLAIN}  Required\n username=alice password="p \\"w\\" = ;d";  ')
    assert (login.module, login.flag) == (PLAIN, "required")
    assert login.options == {"username": "alice", "password": 'p "w" = ;d'}
    assert ";d" not in repr(login)  # the password stays out


@pytest.mark.parametrize(
    "text, reason",
    [
        (f'{PLAIN} required username="u" password="p"', "end with ';'"),
        (f'{PLAIN} mandatory username="u";', "control flag"),
        (f"{PLAIN} required username;", "name=value"),
        (f'{PLAIN} required username="u"; {PLAIN} required username="v";', "exactly one"),
        ('"quoted" required;', "LoginModule class"),
    ],
)
def test_syntax_errors(text, reason):
    with pytest.raises(ConfigException, match=reason):
        parse_jaas_config(text)


def test_plain_gives_username_password_and_the_mechanism():
    security = client_security(
        {**SASL, "sasl.jaas.config": f'{PLAIN} required username="alice" password="pw";'}
    )
    assert (security.mechanism, security.username, security.password) == ("PLAIN", "alice", "pw")


def test_scram_needs_its_mechanism():
    jaas = f'{SCRAM} required username="alice" password="pw";'
    with pytest.raises(ConfigException, match="SCRAM-SHA-256 or -512"):
        client_security({**SASL, "sasl.jaas.config": jaas})
    security = client_security(
        {**SASL, "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}
    )
    assert (security.mechanism, security.username) == ("SCRAM-SHA-512", "alice")


def test_oauthbearer_oidc_options():
    settings = jaas_settings(
        {
            "sasl.jaas.config": f'{OAUTH} required clientId="svc" clientSecret="s" scope="kafka" '
            'extension_traceId="42";'
        }
    )
    assert settings["sasl.mechanism"] == "OAUTHBEARER"
    assert settings["sasl.oauthbearer.method"] == "oidc"
    assert settings["sasl.oauthbearer.client.id"] == "svc"
    assert settings["sasl.oauthbearer.client.secret"] == "s"
    assert settings["sasl.oauthbearer.scope"] == "kafka"
    assert settings["sasl.oauthbearer.extensions"] == "traceId=42"


def test_oauthbearer_unsecured_options():
    settings = jaas_settings(
        {
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{OAUTH} required unsecuredLoginStringClaim_sub="alice" '
            'unsecuredLoginListClaim_scope=",read,write" unsecuredLoginLifetimeSeconds="60" '
            'unsecuredLoginExtension_traceId="7";',
        }
    )
    assert settings["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert settings["sasl.oauthbearer.config"] == (
        "principal=alice scope=read,write lifeSeconds=60 extension_traceId=7"
    )
    token = client_security({**SASL, **settings}).token
    assert token is not None and token.current().principal == "alice"


@pytest.mark.parametrize(
    "config, reason",
    [
        (
            {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
            "not supported",
        ),
        ({"sasl.jaas.config": f'{PLAIN} required username="u";'}, "username and password"),
        ({"sasl.jaas.config": f'{PLAIN} required user="u" password="p";'}, "unknown option"),
        (
            {
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": f'{SCRAM} required username="u" password="p";',
            },
            "does not fit",
        ),
        (
            {
                "sasl.username": "bob",
                "sasl.jaas.config": f'{PLAIN} required username="u" password="p";',
            },
            "disagree",
        ),
        (
            {"sasl.jaas.config": f'{OAUTH} required unsecuredLoginNumberClaim_n="1";'},
            "unsecuredLoginStringClaim_sub",
        ),
        ({"sasl.jaas.config": f'{OAUTH} required clientId="c" tokenUrl="x";'}, "unknown option"),
    ],
    ids=[
        "kerberos",
        "no-password",
        "unknown",
        "wrong-module",
        "conflict",
        "no-sub",
        "oidc-unknown",
    ],
)
def test_what_cannot_be_honoured_is_a_config_error(config, reason):
    with pytest.raises(ConfigException, match=reason):
        client_security({**SASL, **config})
