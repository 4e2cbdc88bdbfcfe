"""Fixtures shared by the security tests."""

from __future__ import annotations

import pytest
from support.oidc_issuer import TEST_CLIENTS, OidcIssuer
from support.secure_broker import start_other_name_broker


@pytest.fixture(scope="module")
def other_name_broker(tmp_path_factory, pki):
    """A TLS broker whose certificate names another host than 127.0.0.1 (one per module)."""
    broker = start_other_name_broker(tmp_path_factory.mktemp("other-name") / "data", pki)
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def issuer(tmp_path_factory):
    """The local OIDC test issuer with the TEST_CLIENTS (one per module)."""
    with OidcIssuer(tmp_path_factory.mktemp("issuer"), TEST_CLIENTS) as it:
        yield it
