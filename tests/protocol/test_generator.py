"""The generator on a synthetic spec using spec features the real specs barely exercise.

Hex/boolean/float defaults, uint16/uint32, arrays of UUIDs, a field-level `flexibleVersions`
override, a nullable struct, and fields that are regular in old versions and tagged in new ones.
Expected bytes are written out by hand from Kafka's protocol rules. The generated code is
annotated throughout: mypy --strict accepts it and refuses a wrongly typed constructor call.
"""

from __future__ import annotations

import subprocess
import sys
import types
import uuid
from pathlib import Path

import pytest

from onceflow.protocol.codec import DecodeError

from .samples import gen_module

SPEC = {
    "apiKey": 9999,
    "type": "request",
    "name": "SyntheticRequest",
    "validVersions": "0-3",
    "flexibleVersions": "2+",
    "fields": [
        {"name": "HexValue", "type": "int32", "versions": "0+", "default": "0x7fffffff"},
        {"name": "Flag", "type": "bool", "versions": "0+", "default": "True"},
        {"name": "Ratio", "type": "float64", "versions": "1+", "default": "1.5"},
        {"name": "Port", "type": "uint16", "versions": "0+"},
        {"name": "Big", "type": "uint32", "versions": "0+"},
        {"name": "Ids", "type": "[]uuid", "versions": "0+"},
        {
            "name": "ClientId",
            "type": "string",
            "versions": "0+",
            "nullableVersions": "0+",
            "flexibleVersions": "none",
        },
        {
            "name": "Later",
            "type": "int64",
            "versions": "1+",
            "taggedVersions": "3+",
            "tag": 4,
            "default": "-1",
        },
        {
            "name": "Opt",
            "type": "Inner",
            "versions": "0+",
            "nullableVersions": "0+",
            "default": "null",
            "fields": [{"name": "X", "type": "int8", "versions": "0+"}],
        },
        {
            "name": "Blob",
            "type": "bytes",
            "versions": "0+",
            "taggedVersions": "2+",
            "tag": 0,
        },
    ],
}


# null is legal only from version 1 (and is the struct's default)
NARROW_SPEC = {
    "apiKey": 9998,
    "type": "request",
    "name": "NarrowRequest",
    "validVersions": "0-1",
    "flexibleVersions": "none",
    "fields": [
        {"name": "Name", "type": "string", "versions": "0+", "nullableVersions": "1+"},
        {
            "name": "Child",
            "type": "Leaf",
            "versions": "0+",
            "nullableVersions": "1+",
            "default": "null",
            "fields": [{"name": "X", "type": "int8", "versions": "0+"}],
        },
    ],
}

ROOT = Path(__file__).resolve().parents[2]


def load(spec: dict, name: str) -> type:
    source = gen_module().generate_module(name, [spec], "a test spec")
    module = types.ModuleType(name.lower())
    exec(compile(source, name.lower(), "exec"), module.__dict__)
    return getattr(module, spec["name"])


@pytest.fixture(scope="module")
def synthetic():
    return load(SPEC, "Synthetic")


def test_defaults(synthetic) -> None:
    obj = synthetic()
    assert (obj.hex_value, obj.flag, obj.ratio, obj.later) == (0x7FFFFFFF, True, 1.5, -1)
    # a nullable string without a "null" default defaults to "" (as in Kafka)
    assert (obj.port, obj.big, obj.ids, obj.client_id, obj.opt, obj.blob) == (
        0,
        0,
        [],
        "",
        None,
        b"",
    )
    assert synthetic.FLEXIBLE_MIN == 2 and synthetic.VALID_VERSIONS == (0, 3)


ID = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)


def sample(synthetic):
    return synthetic(
        hex_value=1,
        flag=False,
        ratio=2.0,
        port=65535,
        big=2**32 - 1,
        ids=[ID],
        client_id="c",
        later=7,
        opt=synthetic.Inner(x=-2),
        blob=b"zz",
    )


def test_version_0_layout(synthetic) -> None:
    obj = sample(synthetic)
    obj.ratio, obj.later = 1.5, -1  # not in v0 and not ignorable: must stay at defaults
    expected = (
        b"\x00\x00\x00\x01" + b"\x00" + b"\xff\xff" + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x01" + ID.bytes
        + b"\x00\x01c"
        + b"\x01\xfe"  # nullable struct: int8 marker 1, then the struct
        + b"\x00\x00\x00\x02zz"
    )  # fmt: skip
    assert obj.encode(0) == expected
    assert synthetic.decode(expected, 0) == obj


def test_non_ignorable_missing_field_refused(synthetic) -> None:
    from onceflow.protocol.codec import UnsupportedVersionError

    with pytest.raises(UnsupportedVersionError, match="ratio"):
        sample(synthetic).encode(0)


def test_version_2_regular_then_tagged(synthetic) -> None:
    obj = sample(synthetic)
    expected = (
        b"\x00\x00\x00\x01" + b"\x00" + b"\x40\x00" + b"\x00" * 6  # 2.0 as float64
        + b"\xff\xff" + b"\xff\xff\xff\xff"
        + b"\x02" + ID.bytes  # compact array
        + b"\x00\x01c"  # client id is never compact
        + b"\x00\x00\x00\x00\x00\x00\x00\x07"  # Later: still a regular field in v2
        + b"\x01\xfe\x00"  # a struct in a flexible version has its own tagged section
        + b"\x01" + b"\x00\x03\x03zz"  # tagged: Blob (tag 0), compact bytes inside
    )  # fmt: skip
    assert obj.encode(2) == expected
    assert synthetic.decode(expected, 2) == obj


def test_version_3_tags_in_order_and_defaults_omitted(synthetic) -> None:
    obj = sample(synthetic)
    data = obj.encode(3)
    tail = b"\x02" + b"\x00\x03\x03zz" + b"\x04\x08\x00\x00\x00\x00\x00\x00\x00\x07"
    assert data.endswith(b"\x01\xfe\x00" + tail)
    assert synthetic.decode(data, 3) == obj
    obj.later, obj.blob = -1, b""
    assert obj.encode(3).endswith(b"\x01\xfe\x00\x00")
    obj.opt = None
    assert obj.encode(3).endswith(b"\xff\x00")
    assert synthetic.decode(obj.encode(3), 3) == obj


def test_nullable_struct_marker_is_checked(synthetic) -> None:
    data = synthetic().encode(0)
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            synthetic.decode(data[:cut], 0)


def test_null_where_this_version_forbids_it_is_a_value_error() -> None:
    narrow = load(NARROW_SPEC, "Narrow")
    leaf = narrow.Leaf(x=1)
    assert narrow(name=None, child=None).encode(1) == b"\xff\xff" + b"\xff"
    assert narrow(name="a", child=leaf).encode(0) == b"\x00\x01a" + b"\x01"
    with pytest.raises(ValueError, match="non-nullable field name is None"):
        narrow(name=None, child=leaf).encode(0)
    with pytest.raises(ValueError, match="non-nullable field child is None"):
        narrow(name="a").encode(0)


def _mypy(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    command = [sys.executable, "-m", "mypy", "--config-file", str(tmp_path / "mypy.ini")]
    (tmp_path / "mypy.ini").write_text(
        f"[mypy]\nstrict = True\nignore_missing_imports = True\nfollow_imports = silent\n"
        f"mypy_path = {ROOT / 'src'}\ncache_dir = {tmp_path / 'cache'}\n"
    )
    return subprocess.run(
        [*command, *files], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def test_generated_code_is_strictly_typed(tmp_path: Path) -> None:
    gen = gen_module()
    files = {
        "synthetic.py": gen.generate_module("Synthetic", [SPEC], "a test spec"),
        "narrow.py": gen.generate_module("Narrow", [NARROW_SPEC], "a test spec"),
        "use.py": (
            "from synthetic import SyntheticRequest\n"
            "ok: SyntheticRequest = SyntheticRequest.decode(b'', 0)\n"
            "SyntheticRequest(port='80')\n"
        ),
    }
    done = _mypy(tmp_path, files)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'use.py:3: error: Argument "port" to "SyntheticRequest" has incompatible type "str"; '
        'expected "int"  [arg-type]'
    ], done.stdout + done.stderr
