"""The four SCRAM messages of RFC 5802 section 7: parse and format, text only (no keys, no state).

    client-first  = gs2-header client-first-bare
    gs2-header    = "n," ["a=" saslname] ","          (only "n": no channel binding)
    client-first-bare = ["m=" value ","] "n=" saslname ",r=" nonce *("," extension)
    server-first  = ["m=" value ","] "r=" nonce ",s=" base64 ",i=" digits *("," extension)
    client-final  = "c=" base64 ",r=" nonce *("," extension) ",p=" base64
    server-final  = ("e=" value / "v=" base64) *("," extension)

Attributes come in exactly this order. No field holds a raw comma (a user name writes it `=2C`
and `=` as `=3D`), so a message splits on commas. `m=` (a mandatory extension) is refused as
RFC 5802 requires; Kafka's own pattern lets it through and ignores it. Other extensions
(Kafka's `tokenauth=true` among them) are returned to the caller, which decides. Every parse error
is a `ScramMessageError`; the state machines turn it into an authentication failure.

User names are UTF-8 without SASLprep, as Kafka does (`ScramFormatter.normalize` is only UTF-8
encoding); Kafka's pattern also limits them to ASCII, onceflow accepts any UTF-8 except NUL.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ClientFinalMessage",
    "ClientFirstMessage",
    "ScramMessageError",
    "ServerFinalMessage",
    "ServerFirstMessage",
    "escape_saslname",
    "format_client_final",
    "format_client_first",
    "format_server_final",
    "format_server_first",
    "parse_client_final",
    "parse_client_first",
    "parse_server_final",
    "parse_server_first",
    "unescape_saslname",
]

_SASLNAME: Final = re.compile(r"(?:[^=,\x00]|=2C|=3D)+")
_NONCE: Final = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII except ","
_EXTENSION_NAME: Final = re.compile(r"[A-Za-z]+")
_DIGITS: Final = re.compile(r"[0-9]{1,10}")
MAX_ITERATION_COUNT: Final = 2**31 - 1  # a Java int, as Kafka parses it


class ScramMessageError(ValueError):
    """A SCRAM message that does not follow the grammar."""


@dataclass(frozen=True)
class ClientFirstMessage:
    gs2_header: str  # as received, e.g. "n,," or "n,a=alice,"; the client-final repeats it
    authorization_id: str  # unescaped; "" when absent
    username: str  # unescaped
    nonce: str
    extensions: Mapping[str, str]
    bare: str  # client-first-message-bare as received, the first part of AuthMessage


@dataclass(frozen=True)
class ServerFirstMessage:
    nonce: str  # client nonce + server nonce
    salt: bytes
    iterations: int
    text: str  # as received or sent, the second part of AuthMessage


@dataclass(frozen=True)
class ClientFinalMessage:
    channel_binding: bytes  # decoded "c=": must equal the gs2 header
    nonce: str
    proof: bytes = field(repr=False)
    without_proof: str  # the third part of AuthMessage


@dataclass(frozen=True)
class ServerFinalMessage:
    server_signature: bytes | None  # None when the server sent "e="
    error: str | None


def escape_saslname(username: str) -> str:
    """RFC 5802's saslname: "=" becomes "=3D", "," becomes "=2C"."""
    return username.replace("=", "=3D").replace(",", "=2C")


def unescape_saslname(saslname: str) -> str:
    """The user name a saslname stands for; a "=" not starting "=2C"/"=3D" is an error."""
    if not _SASLNAME.fullmatch(saslname):
        raise ScramMessageError(f"invalid saslname {saslname!r}")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _decode(data: bytes, what: str) -> list[str]:
    """The message's attributes, split on commas."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramMessageError(f"{what} is not UTF-8") from None
    if "\x00" in text:
        raise ScramMessageError(f"{what} contains NUL")
    return text.split(",")


def _attribute(part: str, name: str, what: str) -> str:
    """The value of `part`, which must be attribute `name` with a non-empty value."""
    if not part.startswith(name + "=") or len(part) == len(name) + 1:
        raise ScramMessageError(f"{what}: expected a non-empty '{name}=' attribute, got {part!r}")
    return part[len(name) + 1 :]


def _nonce(part: str, what: str) -> str:
    nonce = _attribute(part, "r", what)
    if not _NONCE.fullmatch(nonce):
        raise ScramMessageError(f"{what}: the nonce has characters outside printable ASCII")
    return nonce


def _base64(value: str, what: str) -> bytes:
    """Canonical base64 only: padded, and no stray bits in the last character (so that one
    value has one spelling)."""
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ScramMessageError(f"{what}: invalid base64") from None
    if base64.b64encode(decoded).decode("ascii") != value:
        raise ScramMessageError(f"{what}: non-canonical base64")
    return decoded


def _extensions(parts: list[str], what: str) -> dict[str, str]:
    extensions: dict[str, str] = {}
    for part in parts:
        name, sep, value = part.partition("=")
        if not sep or not value or not _EXTENSION_NAME.fullmatch(name):
            raise ScramMessageError(f"{what}: invalid extension {part!r}")
        if name in extensions:
            raise ScramMessageError(f"{what}: extension {name!r} given twice")
        extensions[name] = value
    return extensions


def _refuse_mandatory_extension(part: str, what: str) -> None:
    if part.startswith("m="):
        raise ScramMessageError(f"{what}: mandatory extension 'm=' is not supported")


def parse_client_first(data: bytes) -> ClientFirstMessage:
    what = "client-first message"
    parts = _decode(data, what)
    if len(parts) < 4:
        raise ScramMessageError(f"{what}: too few attributes")
    if parts[0] != "n":
        raise ScramMessageError(f"{what}: channel binding flag {parts[0]!r} is not supported")
    authorization_id = ""
    if parts[1]:
        authorization_id = unescape_saslname(_attribute(parts[1], "a", what))
    _refuse_mandatory_extension(parts[2], what)
    username = unescape_saslname(_attribute(parts[2], "n", what))
    nonce = _nonce(parts[3], what)
    return ClientFirstMessage(
        gs2_header=f"{parts[0]},{parts[1]},",
        authorization_id=authorization_id,
        username=username,
        nonce=nonce,
        extensions=_extensions(parts[4:], what),
        bare=",".join(parts[2:]),
    )


def format_client_first(
    username: str,
    nonce: str,
    authorization_id: str = "",
    extensions: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """(gs2 header, client-first-message-bare); the message is their concatenation."""
    authzid = f"a={escape_saslname(authorization_id)}" if authorization_id else ""
    bare = f"n={escape_saslname(username)},r={nonce}"
    for name, value in (extensions or {}).items():
        bare += f",{name}={value}"
    return f"n,{authzid},", bare


def parse_server_first(data: bytes) -> ServerFirstMessage:
    what = "server-first message"
    parts = _decode(data, what)
    if len(parts) < 3:
        raise ScramMessageError(f"{what}: too few attributes")
    _refuse_mandatory_extension(parts[0], what)
    nonce = _nonce(parts[0], what)
    salt = _base64(_attribute(parts[1], "s", what), what)
    iterations_text = _attribute(parts[2], "i", what)
    if not _DIGITS.fullmatch(iterations_text) or int(iterations_text) > MAX_ITERATION_COUNT:
        raise ScramMessageError(f"{what}: invalid iteration count {iterations_text!r}")
    _extensions(parts[3:], what)  # validated, then ignored
    return ServerFirstMessage(nonce, salt, int(iterations_text), ",".join(parts))


def format_server_first(nonce: str, salt: bytes, iterations: int) -> str:
    return f"r={nonce},s={base64.b64encode(salt).decode('ascii')},i={iterations}"


def parse_client_final(data: bytes) -> ClientFinalMessage:
    what = "client-final message"
    parts = _decode(data, what)
    if len(parts) < 3:
        raise ScramMessageError(f"{what}: too few attributes")
    channel_binding = _base64(_attribute(parts[0], "c", what), what)
    nonce = _nonce(parts[1], what)
    _extensions(parts[2:-1], what)  # validated, then ignored
    proof = _base64(_attribute(parts[-1], "p", what), what)
    return ClientFinalMessage(channel_binding, nonce, proof, ",".join(parts[:-1]))


def format_client_final(gs2_header: str, nonce: str) -> str:
    """client-final-message-without-proof; the client appends ",p=" + base64 proof."""
    return f"c={base64.b64encode(gs2_header.encode()).decode('ascii')},r={nonce}"


def parse_server_final(data: bytes) -> ServerFinalMessage:
    what = "server-final message"
    parts = _decode(data, what)
    _extensions(parts[1:], what)  # validated, then ignored
    if parts[0].startswith("e="):
        return ServerFinalMessage(None, _attribute(parts[0], "e", what))
    signature = _base64(_attribute(parts[0], "v", what), what)
    return ServerFinalMessage(signature, None)


def format_server_final(server_signature: bytes) -> str:
    return f"v={base64.b64encode(server_signature).decode('ascii')}"
