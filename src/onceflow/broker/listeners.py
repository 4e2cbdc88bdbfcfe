"""The broker's listeners, from Kafka's `listeners`, `advertised.listeners` and
`listener.security.protocol.map`.

`listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093` names one or more listeners, each
`NAME://HOST:PORT`. The name picks the security protocol through
`listener.security.protocol.map` (Kafka's default maps each of PLAINTEXT, SSL, SASL_PLAINTEXT
and SASL_SSL to itself, so custom names such as `INTERNAL:SASL_SSL` need an entry). An empty host
binds every interface, as in Kafka. Names must be unique, and so must ports unless 0.

`advertised.listeners` gives, per listener name, the address Metadata, FindCoordinator and
DescribeCluster hand to clients that connected through that listener; a listener it does not
name advertises its bound address. A bare `HOST:PORT` (onceflow's older form) means the first
listener.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "Listener",
    "ListenerConfigError",
    "ListenerSpec",
    "SecurityProtocol",
    "parse_endpoint",
    "parse_listeners",
    "parse_protocol_map",
]


class ListenerConfigError(ValueError):
    """A listener setting that cannot be used; the message names the key (`broker.config`
    turns it into its ConfigError)."""


@dataclass(frozen=True)
class Listener:
    """A host and port; `str()` is `host:port` (IPv6 hosts in brackets)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class SecurityProtocol(Enum):
    """Kafka's security protocols: is the socket TLS, and does the client log in with SASL."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


DEFAULT_PROTOCOL_MAP: Final = ",".join(f"{p.value}:{p.value}" for p in SecurityProtocol)


@dataclass(frozen=True)
class ListenerSpec:
    """One configured listener: its name, protocol, bind address and advertised address (None:
    the bound address)."""

    name: str
    protocol: SecurityProtocol
    bind: Listener
    advertised: Listener | None = None


def parse_endpoint(text: str, key: str) -> tuple[str, Listener]:
    """`NAME://HOST:PORT` or `HOST:PORT` as (upper-case name or "", address)."""
    name, sep, address = text.partition("://")
    if not sep:
        name, address = "", text
    host, sep, port_text = address.rpartition(":")
    if not sep:
        raise ListenerConfigError(f"{key}: expected HOST:PORT or NAME://HOST:PORT, got {text!r}")
    try:
        port = int(port_text)
    except ValueError:
        raise ListenerConfigError(f"{key}: bad port in {text!r}") from None
    if not 0 <= port <= 65535:
        raise ListenerConfigError(f"{key}: port out of range in {text!r}")
    return name.strip().upper(), Listener(host.strip("[]") or "0.0.0.0", port)


def parse_protocol_map(text: str) -> Mapping[str, SecurityProtocol]:
    """`NAME:PROTOCOL,...` as a mapping; raises ConfigError naming the key."""
    result: dict[str, SecurityProtocol] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, protocol = item.partition(":")
        try:
            result[name.strip().upper()] = SecurityProtocol(protocol.strip().upper())
        except ValueError:
            raise ListenerConfigError(
                f"listener.security.protocol.map: bad entry {item!r} (expected NAME:PROTOCOL "
                f"with PROTOCOL one of {', '.join(p.value for p in SecurityProtocol)})"
            ) from None
        if not sep or not name.strip():
            raise ListenerConfigError(f"listener.security.protocol.map: bad entry {item!r}")
    return result


def parse_listeners(
    listeners: str, advertised: str | None, protocol_map: str = DEFAULT_PROTOCOL_MAP
) -> list[ListenerSpec]:
    """The listeners in configured order; raises ConfigError naming the key at fault."""
    protocols = parse_protocol_map(protocol_map)
    bound: list[tuple[str, Listener]] = []
    for item in filter(None, (part.strip() for part in listeners.split(","))):
        name, address = parse_endpoint(item, "listeners")
        bound.append((name or "PLAINTEXT", address))
    if not bound:
        raise ListenerConfigError("listeners: at least one listener is required")
    names = [name for name, _ in bound]
    if len(set(names)) != len(names):
        raise ListenerConfigError(
            f"listeners: each listener name must be unique, got {listeners!r}"
        )
    ports = [address.port for _, address in bound if address.port]
    if len(set(ports)) != len(ports):
        raise ListenerConfigError(f"listeners: each listener needs its own port, got {listeners!r}")
    advertised_by_name: dict[str, Listener] = {}
    for item in filter(None, (part.strip() for part in (advertised or "").split(","))):
        name, address = parse_endpoint(item, "advertised.listeners")
        name = name or names[0]
        if name not in names:
            raise ListenerConfigError(
                f"advertised.listeners: {name} is not a listener in {listeners!r}"
            )
        advertised_by_name[name] = address
    specs = []
    for name, address in bound:
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerConfigError(
                f"listeners: no security protocol for listener {name} in "
                "listener.security.protocol.map"
            )
        specs.append(ListenerSpec(name, protocol, address, advertised_by_name.get(name)))
    return specs
