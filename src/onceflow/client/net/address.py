"""`host:port` strings, as `bootstrap.servers` and the command-line tools take them."""

from __future__ import annotations


def split_host_port(address: str) -> tuple[str, int] | None:
    """`(host, port)` of `host:port` (an IPv6 host may be bracketed: `[::1]:9092`); None when
    `address` is not of that form. Callers raise their own error."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)
