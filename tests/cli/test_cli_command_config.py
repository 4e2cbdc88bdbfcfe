"""`--command-config FILE`: Java properties syntax, and which source wins."""

from __future__ import annotations

from onceflow.cli.main import build_parser
from onceflow.cli.options import client_properties
from onceflow.properties import parse_properties


def test_java_properties_syntax():
    text = "# comment\n! comment\na=1\nb : 2\nc 3\nd=x\\=y\\\\z\ne=/tmp/\\\n   ca.pem\nf=\n"
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "x=y\\z", "e": "/tmp/ca.pem", "f": ""
    }  # fmt: skip


def test_flags_override_x_overrides_the_file(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("bootstrap.servers=file:1\nsasl.username=file\nclient.id=file\n")
    parse = build_parser().parse_args
    args = parse(["topics", "list", "--command-config", str(path), "-X", "client.id=x"])
    config = client_properties(args)
    assert (config["bootstrap.servers"], config["client.id"]) == ("file:1", "x")
    assert config["sasl.username"] == "file" and args.bootstrap_server == "file:1"
    args = parse(["topics", "list", "--command-config", str(path), "--bootstrap-server", "f:2"])
    assert client_properties(args)["bootstrap.servers"] == "f:2"
