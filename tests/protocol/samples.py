"""Sample builder for the generated messages: random but valid values for every field.

Reads the same JSON specs through the generator's parser (`tools/gen_messages.py`) to know each
field's type, versions, nullability and tags, then fills in values with a seeded `random.Random`
(nested arrays, nulls where nullable, tagged fields sometimes set). Byte-level agreement with the
independent oracles (kafka-python, kio) is what checks the generated layouts.
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import sys
import uuid
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@cache
def gen_module():
    """The generator module, loaded from tools/gen_messages.py."""
    spec = importlib.util.spec_from_file_location(
        "gen_messages", ROOT / "tools" / "gen_messages.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_messages", module)
    spec.loader.exec_module(module)
    return module


@cache
def message_specs() -> dict[str, dict]:
    """Request/response specs by message name (e.g. "ProduceRequest")."""
    return {
        spec["name"]: spec
        for spec in gen_module().load_specs().values()
        if spec.get("type") in ("request", "response")
    }


@cache
def parsed(name: str):
    """`(StructDef, our class, valid Versions, flexible Versions)` for a message name."""
    gen = gen_module()
    spec = message_specs()[name]
    sd = gen.SpecParser(spec, spec["type"].capitalize()).parse()
    api = name.removesuffix("Request").removesuffix("Response")
    module = importlib.import_module(f"onceflow.protocol.messages.{gen.snake(api)}")
    cls = getattr(module, name)
    return (
        sd,
        cls,
        gen.Versions.parse(spec["validVersions"]),
        gen.Versions.parse(spec["flexibleVersions"]),
    )


def all_cases() -> list[tuple[str, int]]:
    """Every (message name, version) pair the specs declare valid."""
    cases = []
    for name in sorted(message_specs()):
        _, _, valid, _ = parsed(name)
        cases += [(name, v) for v in range(valid.lo, valid.hi + 1)]
    return cases


def resolve(cls, path: str):
    """Nested class for a struct path like "ProduceRequest.TopicProduceData"."""
    obj = cls
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_TEXT = "abcxyz-_.ÄÖü日本€🙂"


_ERROR_CODES = (0, 0, 3, 6, 51, -1)


def _scalar(rng: random.Random, t: str, tame: bool = False, attr: str = ""):
    if tame and t in _INT_RANGES:
        # values a typed oracle (kio) accepts: known error codes, small non-negative ints
        if attr.endswith("error_code") or attr == "error":
            return rng.choice(_ERROR_CODES)
        return rng.randint(0, 100)
    if t == "bool":
        return rng.random() < 0.5
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, rng.randint(lo, hi)])
    if t == "float64":
        return rng.choice([0.0, -1.5, 1e300, rng.uniform(-1e6, 1e6)])
    if t == "string":
        return "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 12)))
    if t in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 40))
    if t == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise ValueError(t)


def build(rng: random.Random, cls, sd, version: int, flexible: bool, depth=0, tame=False):
    """A random instance of struct `sd` (class `cls`) valid at `version`.

    `tame` restricts integers to small non-negative values and known error codes."""
    kwargs = {}
    for fd in sd.fields:
        if version not in fd.versions:
            continue
        if flexible and version in fd.tagged and rng.random() < 0.4:
            continue  # leave the tagged field at its default
        nullable = version in fd.nullable
        if nullable and rng.random() < 0.25:
            kwargs[fd.attr] = None
            continue
        if fd.is_array:
            count = rng.randint(0, 3 if depth < 2 else 1)
            if fd.struct is not None:
                item_cls = resolve(_top(cls), fd.struct.path)
                kwargs[fd.attr] = [
                    build(rng, item_cls, fd.struct, version, flexible, depth + 1, tame)
                    for _ in range(count)
                ]
            else:
                kwargs[fd.attr] = [_scalar(rng, fd.elem, tame, fd.attr) for _ in range(count)]
        elif fd.struct is not None:
            item_cls = resolve(_top(cls), fd.struct.path)
            kwargs[fd.attr] = build(rng, item_cls, fd.struct, version, flexible, depth + 1, tame)
        else:
            kwargs[fd.attr] = _scalar(rng, fd.type, tame, fd.attr)
    return cls(**kwargs)


def _top(cls):
    return sys.modules[cls.__module__].__dict__[cls.__qualname__.split(".")[0]]


def sample(name: str, version: int, seed: int, tame: bool = False):
    """A random message `name` valid at `version`, reproducible from `seed`."""
    sd, cls, _, flexible = parsed(name)
    rng = random.Random(f"{name}/{version}/{seed}/{tame}")
    return build(rng, cls, sd, version, version in flexible, tame=tame)
