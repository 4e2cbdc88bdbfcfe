"""Base classes for the generated message classes in `onceflow.protocol.messages`.

A generated class lists its fields in `_FIELDS` (also its `__slots__`) and, for messages, maps
each supported version to a specialised decoder and encoder function in `_DECODERS` and
`_ENCODERS`. Decoders have the signature `(buf: memoryview, pos: int) -> (obj, pos)`; encoders
`(obj, out: list[BytesLike]) -> None` and append `bytes`-like parts to `out`.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Any, ClassVar, Final, Generic, Self, TypeVar

from onceflow.common import BytesLike
from onceflow.protocol.codec import DecodeError, UnsupportedVersionError

__all__ = ["Struct", "Message", "Request", "UNSET", "Unset"]


class Unset(enum.Enum):
    """Marker for "argument not given" where the default is a fresh mutable value: a
    constructor parameter `topics: list[Topic] | Unset = UNSET` (one member, so `is UNSET`
    narrows the type)."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET

# A decoder `(buf, pos) -> (message, end)` and an encoder `(message, out) -> None` of one
# generated class; the tables of a class hold functions of that class only (hence Any).
Decoder = Callable[[memoryview, int], tuple[Any, int]]
Encoder = Callable[[Any, list[BytesLike]], None]


class Struct:
    """A Kafka struct: slots named after its fields, equality by value, a readable repr."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for name in self._FIELDS:
            if getattr(self, name) != getattr(other, name):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={_show(getattr(self, name))}" for name in self._FIELDS)
        return f"{type(self).__qualname__}({args})"


def _show(value: object) -> str:
    if type(value) is memoryview:
        return f"<memoryview of {value.nbytes} bytes>"
    return repr(value)


_DECODE_FAILURES = (struct.error, IndexError, ValueError, OverflowError)


class Message(Struct):
    """A request or response body of one API, decodable and encodable at every valid version."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    VALID_VERSIONS: ClassVar[tuple[int, int]]
    FLEXIBLE_MIN: ClassVar[int | None]
    LATEST_VERSION_UNSTABLE: ClassVar[bool] = False
    _DECODERS: ClassVar[dict[int, Decoder]]
    _ENCODERS: ClassVar[dict[int, Encoder]]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        """True if `version` uses compact encodings and tagged fields."""
        return cls.FLEXIBLE_MIN is not None and version >= cls.FLEXIBLE_MIN

    @classmethod
    def decode(cls, buf: BytesLike, version: int) -> Self:
        """Decode a whole body at `version`; bytes after the body are ignored.

        `records` fields come back as zero-copy `memoryview` slices of `buf`. Raises
        `DecodeError` for malformed input or a version outside `VALID_VERSIONS`."""
        return cls.decode_from(buf, version)[0]

    @classmethod
    def decode_from(cls, buf: BytesLike, version: int, pos: int = 0) -> tuple[Self, int]:
        """Decode a body starting at `pos`; returns `(message, end_position)`."""
        decoder = cls._DECODERS.get(version)
        if decoder is None:
            raise DecodeError(f"{cls.__name__} version {version} is not supported")
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        try:
            return decoder(buf, pos)
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"{cls.__name__} v{version}: {exc}") from exc

    def encode_parts(self, version: int) -> list[BytesLike]:
        """Encode as a list of bytes-like parts (record sets are not copied).

        Raises `UnsupportedVersionError` for an unknown version or a non-default value in a
        non-ignorable field the version lacks (as Kafka does), `ValueError` for out-of-range
        values."""
        encoder = self._ENCODERS.get(version)
        if encoder is None:
            raise UnsupportedVersionError(f"{type(self).__name__} version {version} is unknown")
        out: list[BytesLike] = []
        try:
            encoder(self, out)
        except struct.error as exc:  # an int out of its field's range: a caller bug
            raise ValueError(f"{type(self).__name__} v{version}: {exc}") from exc
        return out

    def encode(self, version: int) -> bytes:
        """Encode the body at `version`."""
        return b"".join(self.encode_parts(version))


_R = TypeVar("_R", bound=Message, covariant=True)


class Request(Message, Generic[_R]):
    """A request body, typed by the class of its response (`ProduceRequest` is a
    `Request[ProduceResponse]`), so that a client's `send(request)` returns that class."""

    __slots__ = ()
