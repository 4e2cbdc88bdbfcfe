"""Fixtures shared by the security tests."""

from __future__ import annotations

import pytest
from support.secure_broker import start_other_name_broker


@pytest.fixture(scope="module")
def other_name_broker(tmp_path_factory, pki):
    """A TLS broker whose certificate names another host than 127.0.0.1 (one per module)."""
    broker = start_other_name_broker(tmp_path_factory.mktemp("other-name") / "data", pki)
    yield broker
    broker.stop()
