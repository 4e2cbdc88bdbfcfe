"""Typed values from an argparse `Namespace`, read once where a sub-command starts.

argparse hands out its values untyped. A command declares the options it reads as a frozen
dataclass whose field names are the options' `dest`s, and `from_args(Options, args)` builds it,
checking each value against the field's annotation: a value of another type (a `type=` or
`default=` that disagrees with the dataclass) raises `TypeError` naming the option, instead of
flowing on as `Any`. `value(args, name, kind)` reads one option the same way. `Subparsers`
is the type of what `add_subparsers` returns, which each sub-command module registers into.

The annotations understood are the ones the commands use: a class (`str`, `int`, `float`,
`bool`, `Path`, `argparse.ArgumentParser`, an enum), `X | None` and `list[X]`. As in typing,
an `int` is accepted where a `float` is declared; a `bool` is not accepted as an `int`.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import TYPE_CHECKING, TypeAlias, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# what `add_subparsers` returns (a string: argparse's class is not subscriptable at run time)
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
_D = TypeVar("_D", bound="DataclassInstance")
_T = TypeVar("_T")


def from_args(options: type[_D], args: argparse.Namespace) -> _D:
    """The dataclass `options` with each field read from the attribute of `args` of that
    name (TypeError on a value of the wrong type, AttributeError on a missing one)."""
    hints = typing.get_type_hints(options)
    values = {}
    for field in dataclasses.fields(options):
        found = getattr(args, field.name)
        if not _conforms(found, hints[field.name]):
            raise _mistyped(field.name, hints[field.name], found)
        values[field.name] = found
    return options(**values)


def value(args: argparse.Namespace, name: str, kind: type[_T]) -> _T:
    """The attribute `name` of `args`, which must be a `kind` (else TypeError)."""
    found = getattr(args, name)
    if _conforms(found, kind):
        return cast(_T, found)  # _conforms has checked it
    raise _mistyped(name, kind, found)


def optional(args: argparse.Namespace, name: str, kind: type[_T]) -> _T | None:
    """The attribute `name` of `args`: a `kind`, or None (else TypeError)."""
    return None if getattr(args, name) is None else value(args, name, kind)


def _mistyped(name: str, hint: object, found: object) -> TypeError:
    expected = hint.__name__ if isinstance(hint, type) else str(hint)
    return TypeError(f"option {name!r}: expected {expected}, got {type(found).__name__} {found!r}")


def _conforms(found: object, hint: object) -> bool:
    origin = typing.get_origin(hint)
    if origin is types.UnionType or origin is typing.Union:
        return any(_conforms(found, member) for member in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(found, list) and all(_conforms(element, item) for element in found)
    if hint is None or hint is type(None):
        return found is None
    if hint is float:
        return isinstance(found, int | float) and not isinstance(found, bool)
    if hint is int:
        return isinstance(found, int) and not isinstance(found, bool)
    if isinstance(hint, type):
        return isinstance(found, hint)
    raise TypeError(f"unsupported option type {hint!r}")
