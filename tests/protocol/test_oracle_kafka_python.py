"""Every API and version against kafka-python 3.x's independent codec of the same JSON specs.

For each (message, version) and a few seeded samples (nested arrays, nulls, tagged fields):
- kafka-python decodes our bytes to the same field values and re-encodes the same bytes;
- kafka-python, given the same values, encodes byte-identical output, which we decode back.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import uuid
import warnings
from functools import cache

import kafka.protocol
import pytest
from kafka.protocol.api_message import ApiMessage

from .samples import all_cases, parsed, sample

SEEDS = range(4)


@cache
def kafka_python_classes() -> dict[str, type]:
    """kafka-python's new-style message classes by spec name."""
    with warnings.catch_warnings():  # kafka-python loads its specs with deprecated APIs
        warnings.simplefilter("ignore", DeprecationWarning)
        for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
            if ".old" not in info.name and "generate_stubs" not in info.name:
                importlib.import_module(info.name)
    found: dict[str, type] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "_json" in cls.__dict__:
            found[cls._json["name"]] = cls
    return found


def _has_bitfield(fields: list[dict]) -> bool:
    return any(f["type"] == "bitfield" or _has_bitfield(f.get("fields", [])) for f in fields)


def patched(kcls) -> bool:
    """kafka-python rewrites some schemas (authorized-operations ints as bit sets, renamed)."""
    return _has_bitfield(kcls._json["fields"])


def oracle_sample(name: str, version: int, seed: int):
    obj = sample(name, version, seed)
    if name == "ApiVersionsResponse":
        # kafka-python decodes any ApiVersionsResponse with an error as v0 (Kafka's fallback)
        obj.error_code = 0
    return obj


def plain(value):
    """Normalise values for comparison across codecs."""
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def ours_as_dict(obj, sd, version: int, flexible: bool):
    """Our object as kafka-python's `to_dict(json=False)` shape, for fields in `version`."""
    if obj is None:
        return None
    out = {}
    for fd in sd.fields:
        if version not in fd.versions:
            continue
        value = getattr(obj, fd.attr)
        if fd.struct is not None and fd.is_array and value is not None:
            value = [ours_as_dict(v, fd.struct, version, flexible) for v in value]
        elif fd.struct is not None:
            value = ours_as_dict(value, fd.struct, version, flexible)
        out[fd.attr] = plain(value)
    return out


def to_kafka_python(obj, sd, kcls, version: int, flexible: bool):
    """Build kafka-python objects holding the same values as our `obj`."""
    kwargs = {}
    default = type(obj)()
    for fd in sd.fields:
        if version not in fd.versions:
            continue
        value = getattr(obj, fd.attr)
        if flexible and version in fd.tagged and value == getattr(default, fd.attr):
            continue  # both codecs omit a tagged field at its default
        if fd.struct is not None and value is not None:
            sub = getattr(kcls, fd.struct.name)
            if fd.is_array:
                value = [to_kafka_python(v, fd.struct, sub, version, flexible) for v in value]
            else:
                value = to_kafka_python(value, fd.struct, sub, version, flexible)
        kwargs[fd.attr] = value
    if issubclass(kcls, ApiMessage):
        return kcls(version=version, **kwargs)
    return kcls(**kwargs)


def _kafka_defaults(data: dict, sd, cls, version: int, flexible: bool) -> dict:
    """Map kafka-python's `None` placeholders back to Kafka's defaults: the all-zero UUID, and
    a default-valued struct for an absent (non-nullable) tagged struct field."""
    for fd in sd.fields:
        if version not in fd.versions or fd.attr not in data:
            continue
        value = data[fd.attr]
        if fd.type == "uuid" and value is None:
            data[fd.attr] = uuid.UUID(int=0)
        elif fd.struct is not None and fd.tag is not None and not fd.is_array and value is None:
            default = getattr(cls(), fd.attr)
            if default is not None:
                data[fd.attr] = ours_as_dict(default, fd.struct, version, flexible)
        elif fd.struct is not None and value is not None:
            sub = getattr(cls, fd.struct.name, None) or getattr(_top(cls), fd.struct.name)
            for item in value if fd.is_array else [value]:
                _kafka_defaults(item, fd.struct, sub, version, flexible)
    return data


def _top(cls):
    return sys.modules[cls.__module__].__dict__[cls.__qualname__.split(".")[0]]


@pytest.mark.parametrize(("name", "version"), all_cases())
def test_kafka_python_reads_our_bytes(name: str, version: int) -> None:
    kcls = kafka_python_classes()[name]
    sd, cls, _, flexible_versions = parsed(name)
    flexible = version in flexible_versions
    for seed in SEEDS:
        obj = oracle_sample(name, version, seed)
        data = obj.encode(version)
        theirs = kcls.decode(data, version=version)
        if not patched(kcls):
            expected = ours_as_dict(obj, sd, version, flexible)
            got = plain(theirs.to_dict(json=False))
            got = _kafka_defaults(got, sd, cls, version, flexible)
            assert got == expected, f"{name} v{version} seed {seed}"
        theirs._header = None  # decoded objects lack it; encode() needs it
        assert bytes(theirs.encode()) == data, f"{name} v{version} seed {seed}"


@pytest.mark.parametrize(("name", "version"), all_cases())
def test_kafka_python_writes_our_bytes(name: str, version: int) -> None:
    kcls = kafka_python_classes()[name]
    if patched(kcls):
        pytest.skip("kafka-python models authorized operations as bit sets; bytes checked above")
    sd, cls, _, flexible_versions = parsed(name)
    flexible = version in flexible_versions
    for seed in SEEDS:
        obj = oracle_sample(name, version, seed)
        theirs = to_kafka_python(obj, sd, kcls, version, flexible)
        data = bytes(theirs.encode(version=version))
        assert data == obj.encode(version), f"{name} v{version} seed {seed}"
        decoded, end = cls.decode_from(data, version)
        assert end == len(data)
        assert decoded == obj
